"""The evaluator: scores against an independent numpy computation, no look-ahead, failures recorded."""

from __future__ import annotations

import math
import os
import shutil
import socket
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from planted.agents.evaluator import EvaluatorLimits, evaluate
from planted.agents.sandbox import SandboxLimits
from planted.worlds import WorldSpec, build

pytestmark = pytest.mark.skipif(  # never skipped in CI, which installs bubblewrap
    shutil.which("bwrap") is None and not os.environ.get("CI"), reason="bubblewrap is not installed (apt-get install bubblewrap)"
)

FAST = EvaluatorLimits(
    call_seconds=10.0, sandbox=SandboxLimits(cpu_seconds=120, wall_seconds=120.0, output_bytes=64 * 1024)
)
Frames = tuple[pd.DataFrame, pd.DataFrame]

OLS_MODEL = """
import numpy as np

def fit(train):
    x = train["x3"].to_numpy()[:-1]
    y = train["asset_A"].to_numpy()[1:]
    return np.linalg.lstsq(np.column_stack([np.ones_like(x), x]), y, rcond=None)[0]

def predict(state, history):
    return state[0] + state[1] * history["x3"].iloc[-1]
"""


def write_model(tmp_path: Path, source: str, name: str = "final_model.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


@pytest.fixture(scope="module")
def small() -> Frames:
    """A 120 + 30-month frame with the agent file's columns."""
    rng = np.random.default_rng(20240611)
    n = 150
    frame = pd.DataFrame({"month": np.arange(n), "asset_A": rng.normal(0.003, 0.03, n)})
    for j in range(1, 9):
        frame[f"x{j}"] = rng.standard_normal(n)
    return frame.iloc[:120].reset_index(drop=True), frame.iloc[120:].reset_index(drop=True)


def reference_ols(train: pd.DataFrame, test: pd.DataFrame, column: str, refit_every: int):
    """Expanding OLS of r[t+1] on x[t], refit every ``refit_every`` months, and its scores, from scratch."""
    r = np.concatenate([train["asset_A"], test["asset_A"]])
    x = np.concatenate([train[column], test[column]])
    first, count = len(train), len(test)
    model, bench = np.empty(count), np.empty(count)
    for k in range(count):
        target = first + k
        fitted_through = first - 1 + refit_every * (k // refit_every)  # last month in the fit
        design = np.column_stack([np.ones(fitted_through), x[:fitted_through]])
        coef = np.linalg.lstsq(design, r[1 : fitted_through + 1], rcond=None)[0]
        model[k] = coef[0] + coef[1] * x[target - 1]
        bench[k] = r[:target].mean()
    realised = r[first:]
    oos_r2 = 1 - np.sum((realised - model) ** 2) / np.sum((realised - bench) ** 2)
    f = (realised - bench) ** 2 - ((realised - model) ** 2 - (bench - model) ** 2)
    stat = f.mean() / (f.std(ddof=1) / math.sqrt(count))
    return model, bench, oos_r2, stat, 0.5 * math.erfc(stat / math.sqrt(2))


def test_ols_model_matches_direct_computation(tmp_path: Path) -> None:
    world = build(WorldSpec(family="linear", r2=0.04, phi=0.95, rho=-0.8, shocks="gaussian"), seed=3)
    result = evaluate(write_model(tmp_path, OLS_MODEL), world.visible, world.test, limits=FAST)
    assert result.evaluable and result.error is None and result.sandboxed
    model, bench, oos_r2, stat, pvalue = reference_ols(world.visible, world.test, "x3", 12)
    np.testing.assert_allclose(result.forecasts, model, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(result.benchmark, bench, rtol=1e-12)
    np.testing.assert_array_equal(result.months, world.test["month"].to_numpy())
    np.testing.assert_array_equal(result.realised, world.test["asset_A"].to_numpy())
    assert result.oos_r2 == pytest.approx(oos_r2, rel=1e-9)
    assert result.cw_stat == pytest.approx(stat, rel=1e-9)
    assert result.cw_pvalue == pytest.approx(pvalue, rel=1e-9)
    assert result.to_frame().shape == (360, 4)
    assert "OOS R2" in str(result)


def test_refit_schedule_and_histories(tmp_path: Path, small: Frames) -> None:
    """fit sees all data through the month before the refit; predict sees exactly months 0..m-1."""
    train, test = small
    source = """
    def fit(train):
        assert train["month"].tolist() == list(range(len(train)))
        train.loc[:, "asset_A"] = 0.0  # must not leak into later calls
        return int(train["month"].iloc[-1])

    def predict(state, history):
        assert history["month"].tolist() == list(range(len(history)))
        assert (history["asset_A"] != 0.0).all()
        return float(state * 10000 + history["month"].iloc[-1])
    """
    result = evaluate(write_model(tmp_path, source), train, test, refit_every=7, limits=FAST)
    assert result.evaluable, result.error
    k = np.arange(len(test))
    expected = (len(train) - 1 + 7 * (k // 7)) * 10000 + len(train) - 1 + k
    np.testing.assert_array_equal(result.forecasts, expected.astype(float))


def test_peeking_model_never_sees_a_future_month(tmp_path: Path, small: Frames) -> None:
    """The model is told the test returns (hex-encoded, so that its own source does not hold them)
    and searches for them everywhere it can look: every live object and the call stack (arrays,
    frames, dicts, lists, strings and bytes such as the protocol's lines), stdin, every open fd and
    the file system. Forecast = 1000 x (future returns found) + (last known return found)."""
    train, test = small
    source = f"""
    import gc, inspect, os, sys
    import numpy as np
    import pandas as pd

    TEST_HEX = {[v.hex() for v in test["asset_A"]]!r}
    FIRST = {len(train)}

    def fit(train):
        return None

    def numbers_in(obj):
        if isinstance(obj, pd.DataFrame):
            return obj.select_dtypes("number").to_numpy().ravel().tolist()
        if isinstance(obj, np.ndarray) and obj.dtype.kind == "f":
            return obj.ravel().tolist()
        if isinstance(obj, dict):
            return [x for v in obj.values() if isinstance(v, (np.ndarray, list)) for x in numbers_in(v)]
        if isinstance(obj, list):
            return [x for x in obj if isinstance(x, float)]
        return []

    def predict(state, history):
        k = len(history) - FIRST
        future, known = {{float.fromhex(h) for h in TEST_HEX[k:]}}, history["asset_A"].iloc[-1]
        objects = gc.get_objects() + [v for f in inspect.stack(0) for v in f.frame.f_locals.values()]
        seen, texts = set(), []
        for obj in objects:
            if isinstance(obj, (str, bytes)):
                texts.append(obj if isinstance(obj, str) else obj.decode("utf-8", "replace"))
            else:
                seen.update(numbers_in(obj))
        for text in texts:
            seen.update(v for v in future | {{known}} if repr(v) in text)
        leaked = sys.stdin.buffer.read()
        for fd in range(64):
            try:
                blocking = os.get_blocking(fd)
                os.set_blocking(fd, False)
            except OSError:
                continue
            try:
                leaked += os.read(fd, 1 << 16)
            except OSError:
                pass
            os.set_blocking(fd, blocking)
        prefixes = tuple(p.rstrip("/") + "/" for p in {{sys.prefix, sys.base_prefix}})  # a venv under /tmp (CI)
        files = [os.path.join(r, n) for top in ("/sandbox", "/workspace", "/tmp")
                 for r, _, names in os.walk(top) for n in names if not os.path.join(r, n).startswith(prefixes)]
        unexpected = set(files) - {{"/sandbox/final_model.py", "/sandbox/eval_harness.py"}}
        return 1000.0 * len(future & seen) + (known in seen) + 1e6 * bool(leaked) + 1e7 * bool(unexpected)
    """
    result = evaluate(write_model(tmp_path, source), train, test, limits=FAST)
    assert result.evaluable, result.error
    np.testing.assert_array_equal(result.forecasts, np.ones(len(test)))


def test_model_cannot_reach_network_sealed_data_or_write_outside(tmp_path: Path, small: Frames) -> None:
    train, test = small
    sealed = tmp_path / "sealed" / "test.csv"
    sealed.parent.mkdir()
    test.to_csv(sealed, index=False)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        source = f"""
        import os, socket

        def attempts():
            score = 0
            try:
                socket.create_connection(("127.0.0.1", {server.getsockname()[1]}), timeout=1).close()
                score += 1
            except OSError:
                pass
            for path in ({str(sealed)!r}, {str(tmp_path)!r}, "/root/.bashrc"):
                score += 10 * os.path.exists(path)
            for path in ("/x", "/sandbox/final_model.py", "/usr/x"):
                try:
                    open(path, "a").write("x")
                    score += 100
                except OSError:
                    pass
            return score

        def fit(train):
            return attempts()

        def predict(state, history):
            return float(state + attempts())
        """
        result = evaluate(write_model(tmp_path, source), train, test, limits=FAST)
        with pytest.raises(BlockingIOError):
            server.accept()
    assert result.evaluable, result.error
    np.testing.assert_array_equal(result.forecasts, np.zeros(len(test)))


FAILING = {
    "fit raises": ("def fit(train):\n    return 1 / 0\n\ndef predict(state, history):\n    return 0.0\n",
                   "fit before target month 120 raised ZeroDivisionError"),
    "predict raises later": ("def fit(train):\n    return None\n\ndef predict(state, history):\n"
                             "    if len(history) > 125:\n        raise KeyError('x9')\n    return 0.0\n",
                             "predict for target month 126 raised KeyError"),
    "nan": ("def fit(train):\n    return None\n\ndef predict(state, history):\n    return float('nan')\n",
            "predict for target month 120 returned a non-finite forecast (nan)"),
    "inf": ("import numpy as np\ndef fit(train):\n    return None\n\ndef predict(state, history):\n"
            "    return np.inf\n", "non-finite forecast (inf)"),
    "string": ("def fit(train):\n    return None\n\ndef predict(state, history):\n    return '0.01'\n",
               "TypeError: predict must return one number, got str"),
    "two numbers": ("import numpy as np\ndef fit(train):\n    return None\n\ndef predict(state, history):\n"
                    "    return np.array([0.1, 0.2])\n", "got ndarray (shape (2,)"),
    "no predict": ("def fit(train):\n    return None\n", "does not define predict"),
    "syntax error": ("def fit(train:\n", "loading the model file raised SyntaxError"),
    "exits": ("import sys\ndef fit(train):\n    sys.exit(0)\n\ndef predict(state, history):\n    return 0.0\n",
              "raised SystemExit"),
    "sleeps": ("import time\ndef fit(train):\n    return None\n\ndef predict(state, history):\n"
               "    time.sleep(10**6)\n", "predict for target month 120 timed out (limit 2 s per call)"),
    "fork bomb": ("import os\ndef fit(train):\n    while True:\n        os.fork()\n\n"
                  "def predict(state, history):\n    return 0.0\n", "BlockingIOError"),
    "memory": ("import numpy as np\ndef fit(train):\n    return np.ones(2**30)\n\ndef predict(state, history):\n"
               "    return 0.0\n", "MemoryError"),
    "floods stderr": ("import sys\ndef fit(train):\n    while True:\n        print('x' * 10000)\n\n"
                      "def predict(state, history):\n    return 0.0\n", "the model printed more than 65536 bytes"),
}


@pytest.mark.parametrize("case", list(FAILING))
def test_failing_models_are_not_evaluable(case: str, tmp_path: Path, small: Frames) -> None:
    source, reason = FAILING[case]
    limits = EvaluatorLimits(call_seconds=2.0, sandbox=FAST.sandbox)
    result = evaluate(write_model(tmp_path, source), *small, limits=limits)
    assert not result.evaluable
    assert result.error.startswith("not evaluable: ") and reason in result.error, result.error
    assert math.isnan(result.oos_r2) and math.isnan(result.cw_stat) and math.isnan(result.cw_pvalue)
    assert not np.isfinite(result.forecasts[-1])  # never silently zeroed
    assert "not evaluable" in str(result)


def test_failure_keeps_the_forecasts_made_before_it(tmp_path: Path, small: Frames) -> None:
    source = FAILING["predict raises later"][0]
    result = evaluate(write_model(tmp_path, source), *small, limits=FAST)
    np.testing.assert_array_equal(result.forecasts[:6], np.zeros(6))
    assert np.isnan(result.forecasts[6:]).all()


def test_missing_model_file(tmp_path: Path, small: Frames) -> None:
    result = evaluate(tmp_path / "final_model.py", *small, limits=FAST)
    assert not result.evaluable and result.error == "not evaluable: model file final_model.py not found"
    assert np.isnan(result.forecasts).all()


def test_total_time_limit(tmp_path: Path, small: Frames) -> None:
    source = (
        "import time\ndef fit(train):\n    return None\n\ndef predict(state, history):\n"
        "    time.sleep(0.5)\n    return 0.0\n"
    )
    limits = EvaluatorLimits(call_seconds=5.0, sandbox=SandboxLimits(wall_seconds=4.0))
    result = evaluate(write_model(tmp_path, source), *small, limits=limits)
    assert not result.evaluable and "exceeded its total time limit of 4 s" in result.error


def test_unsafe_mode_gives_the_same_forecasts_and_is_stamped(tmp_path: Path, small: Frames) -> None:
    model = write_model(tmp_path, OLS_MODEL)
    sandboxed = evaluate(model, *small, limits=FAST)
    unsafe = evaluate(model, *small, limits=FAST, unsafe_no_sandbox=True)
    assert unsafe.evaluable and not unsafe.sandboxed and "UNSANDBOXED" in unsafe.summary()
    np.testing.assert_array_equal(unsafe.forecasts, sandboxed.forecasts)


def test_contract_errors_are_the_callers(tmp_path: Path, small: Frames) -> None:
    train, test = small
    model = write_model(tmp_path, OLS_MODEL)
    with pytest.raises(ValueError, match="same columns"):
        evaluate(model, train, test.drop(columns="x8"))
    with pytest.raises(ValueError, match="refit_every"):
        evaluate(model, train, test, refit_every=0)


FORGE = """\
import fcntl, os, time


def _channel():
    for fd in range(3, 64):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:") and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_WRONLY:
                return fd
        except OSError:
            pass


def fit(train):
    {fit}
    return None


def predict(state, history):
    {predict}
    return 0.0
"""


@pytest.mark.parametrize(("fit", "predict"), [
    ("os.write(_channel(), b'[' * 200000 + b'\\n')", "pass"),            # JSON nested beyond the recursion limit
    ("pass", "os.write(_channel(), b'{\"ok\": true}\\n'); time.sleep(2)"),  # a reply without a value
    ("os.write(_channel(), b'[1, 2]\\n')", "pass"),                      # not an object
])
def test_forged_replies_on_the_protocol_channel_make_the_model_not_evaluable(tmp_path, small, fit, predict):
    model = tmp_path / "final_model.py"
    model.write_text(FORGE.replace("{fit}", fit).replace("{predict}", predict))
    train, test = small
    result = evaluate(model, train, test, limits=FAST)
    assert not result.evaluable and ("malformed reply" in result.error or "extra reply" in result.error
                                      or "non-finite" in result.error), result.error


def test_a_deep_tree_made_by_the_model_is_removed_and_evaluate_returns(tmp_path, small):
    """A model that builds 1,500 nested directories in the evaluator's workspace at import time."""
    model = tmp_path / "final_model.py"
    model.write_text(
        "import os\nroot = os.open('.', os.O_RDONLY | os.O_DIRECTORY)\nbottoms = []\nfor i in range(25):\n"
        "    fd, name = os.dup(root), f'seg{i}'\n    for d in range(60):\n"
        "        os.mkdir(name, dir_fd=fd); new = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)\n"
        "        os.close(fd); fd, name = new, 'd'\n    bottoms.append(fd)\n"
        "for i in range(1, 25):\n    os.rename(f'seg{i}', 's', src_dir_fd=root, dst_dir_fd=bottoms[i - 1])\n\n\n"
        "def fit(train):\n    return None\n\n\ndef predict(state, history):\n    return float(history['asset_A'].mean())\n"
    )
    train, test = small
    before = set(Path(tempfile.gettempdir()).glob("planted-eval-*"))
    result = evaluate(model, train, test, limits=FAST)
    assert result.evaluable or "workspace limits" in (result.error or ""), result.error  # never an exception
    assert set(Path(tempfile.gettempdir()).glob("planted-eval-*")) == before  # nothing left on the host
