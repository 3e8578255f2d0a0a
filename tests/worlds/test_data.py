"""The Kenneth French CSV parser, the embedded HML series and `planted data fetch` (over loopback)."""

import functools
import http.server
import io
import threading
import zipfile

import numpy as np
import pytest

from planted.cli import main
from planted.hashing import sha256_file
from planted.worlds.data import FactorDataError, embedded_hml, fetch_ff5, load_ff5, parse_french_csv

SMALL_FILE = (
    "This file was created by CMPT_ME_BEME_OP_INV_RETS using the 202408 CRSP database.\r\n"
    "The 1-month TBill rate data until 202405 are from Ibbotson Associates.\r\n"
    "\r\n"
    ",Mkt-RF,SMB,HML,RMW,CMA,RF\r\n"
    "196307,   -0.39,   -0.41,   -0.97,    0.68,   -1.18,    0.27\r\n"
    "196308,    5.07,   -0.80,    1.80,    0.36,   -0.35,    0.25\r\n"
    "196309,   -1.57,   -0.52,    0.13,   -0.71,    0.29,    0.27\r\n"
    "\r\n"
    " Annual Factors: January-December \r\n"
    ",Mkt-RF,SMB,HML,RMW,CMA,RF\r\n"
    "  1964,   12.54,    0.47,    9.72,   -3.34,    6.87,    3.54\r\n"
)


def test_parser_reads_monthly_block_in_decimals_and_ignores_annual_block():
    frame = parse_french_csv(SMALL_FILE)
    assert list(frame.columns) == ["Mkt-RF", "SMB", "HML", "RMW", "CMA", "RF"]
    assert [str(m) for m in frame.index] == ["1963-07", "1963-08", "1963-09"]
    np.testing.assert_allclose(frame["HML"].to_numpy(), [-0.0097, 0.0180, 0.0013], rtol=0, atol=1e-15)


def test_parser_on_the_published_file(ff5_file):
    frame = load_ff5(ff5_file)
    assert str(frame.index[0]) == "1963-07" and str(frame.index[-1]) == "2024-08"
    assert len(frame) == 734  # 1963-07 .. 2024-08
    assert frame.loc["2024-08", "RMW"] == pytest.approx(0.0085, abs=1e-15)
    assert frame.attrs["sha256"] == "505bef206e7be6328fbc06146e8de6f8431107d51c8c4c97a54b403479727bfd"


def test_published_hml_agrees_with_embedded_hml_where_they_overlap(ff5_file):
    """Two vintages of the same factor: not identical, but highly correlated (independent data check)."""
    published = load_ff5(ff5_file)["HML"]
    embedded = embedded_hml()
    common = published.loc[embedded.months[0] : embedded.months[-1]]
    assert len(common) == len(embedded.returns) == 645
    assert np.corrcoef(common.to_numpy(), embedded.returns)[0, 1] > 0.95


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("just some text\nwithout a header\n", "no column header line"),
        (",HML,RMW\n196307, 1.0\n", "expected 3 fields"),
        (",HML,RMW\n196307, 1.0, abc\n", "non-numeric value"),
        (",HML,RMW\n196307, 1.0, -99.99\n", "missing-value code"),
        (",HML,RMW\n196307, 1.0, 2.0\n196309, 1.0, 2.0\n", "gaps"),
        (",HML,RMW\n\n", "monthly block after the header line is empty"),
    ],
)
def test_malformed_files_fail_with_the_file_named(text, fragment):
    with pytest.raises(FactorDataError) as info:
        parse_french_csv(text, source="bad.csv")
    assert "bad.csv" in str(info.value) and fragment in str(info.value)


def test_loader_rejects_a_file_without_rmw(tmp_path):
    path = tmp_path / "three.csv"
    path.write_text(",Mkt-RF,SMB,HML,RF\n196307, 1, 2, 3, 4\n")
    with pytest.raises(FactorDataError, match="not the 5-factor"):
        load_ff5(path)


def test_missing_file_names_the_fix(tmp_path):
    with pytest.raises(FactorDataError, match="planted data fetch"):
        load_ff5(tmp_path / "nope.csv")


def _zip_of(text: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("F-F_Research_Data_5_Factors_2x3.csv", text)
    return buffer.getvalue()


@pytest.fixture()
def loopback_server(tmp_path):
    """Serve ``tmp_path/www`` over HTTP on 127.0.0.1 (no network beyond loopback)."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_fetch_downloads_unzips_stores_and_hashes(loopback_server, tmp_path, capsys):
    root, base = loopback_server
    (root / "ff5.zip").write_bytes(_zip_of(SMALL_FILE))
    dest = tmp_path / "data"
    assert main(["data", "fetch", "--url", f"{base}/ff5.zip", "--dest", str(dest)]) == 0
    stored = dest / "F-F_Research_Data_5_Factors_2x3.csv"
    out = capsys.readouterr().out
    assert f"sha256 {sha256_file(stored)}" in out
    assert load_ff5(stored)["RMW"].iloc[0] == pytest.approx(0.0068)


def test_fetch_of_a_broken_download_keeps_no_file(loopback_server, tmp_path):
    root, base = loopback_server
    (root / "broken.zip").write_bytes(_zip_of("<html>maintenance</html>"))
    with pytest.raises(FactorDataError):
        fetch_ff5(tmp_path / "data", url=f"{base}/broken.zip")
    assert not (tmp_path / "data").exists()


def test_fetch_of_an_unreachable_url_gives_one_clear_error(tmp_path, capsys):
    code = main(["data", "fetch", "--url", "http://127.0.0.1:9/none.zip", "--dest", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "could not download" in err[0] and "--path" in err[0]
