"""Factor data: the embedded HML series, the Kenneth French CSV format, and the 5-factor download.

Two sources feed the worlds:

* the **embedded default**, the monthly HML factor shipped inside ``linearmodels``
  (``linearmodels.datasets.french``, 1949-01 .. 2017-03, decimal returns), of which months from
  1963-07 on are used, like the paper; it needs no file and no network;
* the **full data**, the Fama-French 5-factor monthly CSV of the Kenneth French data library
  (``F-F_Research_Data_5_Factors_2x3.csv``), read from a local path given by the user or fetched
  once with ``planted data fetch`` into the user data directory.

All returns leave this module as decimals (the library's CSV is in percent).
"""

from __future__ import annotations

import io
import os
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from planted.hashing import sha256_bytes, sha256_file

FF5_URL = (
    "https://mba.tuck.dartmouth.edu/pages/faculty/ken.french/ftp/"
    "F-F_Research_Data_5_Factors_2x3_CSV.zip"
)
"""Where ``planted data fetch`` downloads the 5-factor file from (the French library's zip)."""
FF5_FILENAME = "F-F_Research_Data_5_Factors_2x3.csv"
EMBEDDED_START = "1963-07"
"""First month of the embedded HML series used by default (the paper's sample start)."""


class FactorDataError(RuntimeError):
    """A factor data file is missing or malformed; the message names the file and the fix."""


@dataclass(frozen=True)
class FactorSeries:
    """One monthly factor return series with its provenance.

    Attributes
    ----------
    name : str
        Factor name, e.g. ``"HML"``.
    months : pandas.PeriodIndex
        Monthly periods.
    returns : ndarray
        Decimal monthly returns.
    source : str
        ``"embedded:linearmodels"`` or ``"file:<name>"``.
    sha256 : str
        SHA-256 of the source file (the linearmodels data file, or the CSV).
    """

    name: str
    months: pd.PeriodIndex
    returns: np.ndarray
    source: str
    sha256: str

    def since(self, start: str) -> "FactorSeries":
        """Return the series restricted to months from ``start`` (``"YYYY-MM"``) on."""
        keep = self.months >= pd.Period(start, freq="M")
        return FactorSeries(self.name, self.months[keep], self.returns[keep], self.source, self.sha256)

    def until(self, end: str) -> "FactorSeries":
        """Return the series restricted to months up to and including ``end`` (``"YYYY-MM"``)."""
        keep = self.months <= pd.Period(end, freq="M")
        return FactorSeries(self.name, self.months[keep], self.returns[keep], self.source, self.sha256)


def user_data_dir() -> Path:
    """Directory for downloaded data: ``$PLANTED_DATA_DIR``, else ``$XDG_DATA_HOME/planted``,
    else ``~/.local/share/planted``."""
    if os.environ.get("PLANTED_DATA_DIR"):
        return Path(os.environ["PLANTED_DATA_DIR"])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "planted"


def embedded_hml(start: str = EMBEDDED_START) -> FactorSeries:
    """Return the embedded monthly HML factor (decimal) from ``linearmodels.datasets.french``.

    Parameters
    ----------
    start : str, default "1963-07"
        First month kept, like the paper's sample.
    """
    from linearmodels.datasets import french

    data = french.load()
    data_file = Path(french.__file__).with_name("french.csv.bz2")
    months = pd.PeriodIndex(pd.to_datetime(data["dates"]), freq="M")
    series = FactorSeries(
        name="HML",
        months=months,
        returns=data["HML"].to_numpy(dtype=float),
        source="embedded:linearmodels.datasets.french",
        sha256=sha256_file(data_file),
    )
    return series.since(start)


def parse_french_csv(text: str, source: str = "<text>") -> pd.DataFrame:
    """Parse the monthly block of a Kenneth French data library CSV into decimal returns.

    Parameters
    ----------
    text : str
        The file's contents: free-text header lines, a column line starting with a comma, rows
        ``YYYYMM, v1, v2, ...`` in percent, then an ``Annual Factors`` block (ignored).
    source : str
        File name used in error messages.

    Returns
    -------
    pandas.DataFrame
        Indexed by a monthly ``PeriodIndex`` named ``month``, one column per factor, in decimals.

    Raises
    ------
    FactorDataError
        When no monthly block is found, a row is malformed or a value is missing (-99.99 / -999).
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    header_at = next(
        (i for i, line in enumerate(lines) if line.strip().startswith(",") and line.count(",") >= 1),
        None,
    )
    if header_at is None:
        raise FactorDataError(
            f"{source}: no column header line (',Mkt-RF,SMB,...') found; is this a Kenneth French "
            "library CSV? Fetch it again with `planted data fetch`."
        )
    columns = [name.strip() for name in lines[header_at].split(",")[1:]]
    months, rows = [], []
    for number, line in enumerate(lines[header_at + 1 :], start=header_at + 2):
        fields = [field.strip() for field in line.split(",")]
        if not fields[0]:
            break  # blank line ends the monthly block
        if not (len(fields[0]) == 6 and fields[0].isdigit()):
            break  # the "Annual Factors" block (or anything else) follows
        if len(fields) != len(columns) + 1:
            raise FactorDataError(
                f"{source}, line {number}: expected {len(columns) + 1} fields, got {len(fields)}; "
                "the file looks truncated or edited. Fetch it again with `planted data fetch`."
            )
        try:
            values = [float(field) for field in fields[1:]]
        except ValueError as exc:
            raise FactorDataError(f"{source}, line {number}: non-numeric value ({exc})") from None
        if any(v <= -99.99 for v in values):
            raise FactorDataError(f"{source}, line {number}: missing-value code (-99.99) in the data")
        months.append(pd.Period(f"{fields[0][:4]}-{fields[0][4:]}", freq="M"))
        rows.append(values)
    if not rows:
        raise FactorDataError(f"{source}: the monthly block after the header line is empty")
    index = pd.PeriodIndex(months, freq="M", name="month")
    if not index.is_monotonic_increasing or index.has_duplicates:
        raise FactorDataError(f"{source}: months are not strictly increasing")
    expected = pd.period_range(index[0], index[-1], freq="M")
    if len(expected) != len(index):
        raise FactorDataError(f"{source}: the monthly block has gaps ({len(expected) - len(index)} months missing)")
    return pd.DataFrame(np.asarray(rows) / 100.0, index=index, columns=columns)


def load_ff5(path: str | Path | None = None) -> pd.DataFrame:
    """Load the Fama-French 5-factor monthly file (decimal returns) from ``path`` or the data dir.

    Parameters
    ----------
    path : path, optional
        A local ``F-F_Research_Data_5_Factors_2x3.csv`` (or the library's zip). Defaults to the
        copy stored by ``planted data fetch`` in :func:`user_data_dir`.

    Returns
    -------
    pandas.DataFrame
        Monthly factors; ``attrs["sha256"]`` holds the file's SHA-256 and ``attrs["source"]`` its path.
    """
    file = Path(path) if path is not None else user_data_dir() / FF5_FILENAME
    if not file.is_file():
        hint = (
            "run `planted data fetch` to download it, or pass --path FILE"
            if path is None
            else "check the path, or run `planted data fetch` and omit --path"
        )
        raise FactorDataError(f"Fama-French 5-factor file not found: {file}; {hint}")
    raw = file.read_bytes()
    if zipfile.is_zipfile(io.BytesIO(raw)):
        raw = _csv_from_zip(raw, str(file))
    try:
        text = raw.decode("latin-1")
    except UnicodeDecodeError as exc:  # pragma: no cover - latin-1 decodes any byte
        raise FactorDataError(f"{file}: not a text file ({exc})") from None
    frame = parse_french_csv(text, source=str(file))
    missing = {"HML", "RMW"} - set(frame.columns)
    if missing:
        raise FactorDataError(
            f"{file}: columns {sorted(missing)} missing; this is not the 5-factor (2x3) file. "
            "Run `planted data fetch` to download the right one."
        )
    frame.attrs["sha256"] = sha256_file(file)
    frame.attrs["source"] = str(file)
    return frame


def ff5_factor(name: str, path: str | Path | None = None) -> FactorSeries:
    """Return one factor (``"HML"`` or ``"RMW"``) of the 5-factor file as a :class:`FactorSeries`."""
    frame = load_ff5(path)
    return FactorSeries(
        name=name,
        months=frame.index,
        returns=frame[name].to_numpy(dtype=float),
        source=f"file:{Path(frame.attrs['source']).name}",
        sha256=frame.attrs["sha256"],
    )


def _csv_from_zip(raw: bytes, source: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        names = [n for n in archive.namelist() if n.lower().endswith(".csv")]
        if len(names) != 1:
            raise FactorDataError(f"{source}: expected one CSV inside the zip, found {names}")
        return archive.read(names[0])


def fetch_ff5(dest_dir: str | Path | None = None, url: str = FF5_URL, timeout: float = 60.0) -> tuple[Path, str]:
    """Download the 5-factor zip, unpack the CSV into ``dest_dir`` and return (path, SHA-256).

    The file is parsed before it is stored, so a broken download never replaces a good copy.

    Parameters
    ----------
    dest_dir : path, optional
        Target directory; defaults to :func:`user_data_dir`.
    url : str
        Source of the zip (``http(s)://`` or ``file://``).
    timeout : float
        Seconds to wait for the server.
    """
    target_dir = Path(dest_dir) if dest_dir is not None else user_data_dir()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - user-chosen URL
            raw = response.read()
    except OSError as exc:
        raise FactorDataError(
            f"could not download {url}: {exc}; check the network, or download the zip by hand and "
            "pass the CSV with --path FILE"
        ) from None
    csv_bytes = _csv_from_zip(raw, url) if zipfile.is_zipfile(io.BytesIO(raw)) else raw
    parse_french_csv(csv_bytes.decode("latin-1"), source=url)
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / FF5_FILENAME
    partial = target.with_suffix(".part")
    partial.write_bytes(csv_bytes)
    partial.replace(target)
    return target, sha256_bytes(csv_bytes)
