"""The float32 math mode of a case (suites/core/precision.py) under the installed torch: set, then restored to what
the user had, through the API this torch offers.

Run here under torch 2.13 (new and legacy APIs); the same file runs under torch 2.11 and 2.6 venvs (.ci/run's
`-m "torch_api and not slow"` runs): on 2.6 the tests of the new API skip with their reason and the legacy ones run.
"""

from __future__ import annotations

import pytest
import torch

from suites.core.precision import float32_mode

NEW_API = hasattr(torch.backends.cuda.matmul, "fp32_precision")  # asked here, not of the code under test
SITES = ("cuda.matmul", "cudnn.conv", "cudnn.rnn", "mkldnn.matmul")
needs_new_api = pytest.mark.skipif(not NEW_API, reason=f"torch {torch.__version__} has no fp32_precision API")


def backend(path: str) -> object:
    module: object = torch.backends
    for part in path.split("."):
        module = getattr(module, part)
    return module


@pytest.fixture(autouse=True)
def fresh_modes():
    """Every test starts from torch's defaults and leaves them behind, set with torch's own calls, not the code
    under test."""
    def defaults() -> None:
        torch.set_float32_matmul_precision("highest")
        torch.backends.cudnn.allow_tf32 = True
        if NEW_API:
            torch.backends.fp32_precision = "none"
            for path, value in (("cuda.matmul", "none"), ("cudnn.conv", "tf32"), ("cudnn.rnn", "tf32"),
                                ("mkldnn.matmul", "none")):
                backend(path).fp32_precision = value

    defaults()
    yield
    defaults()


def new_api() -> dict[str, str]:
    return {path: backend(path).fp32_precision for path in SITES}


def test_the_modes_are_set_inside_and_the_legacy_defaults_come_back():
    with float32_mode(True):
        assert torch.get_float32_matmul_precision() == "high"
        assert torch.backends.cudnn.allow_tf32 is True
    with float32_mode(False):
        assert torch.get_float32_matmul_precision() == "highest"
        assert torch.backends.cudnn.allow_tf32 is False
    assert torch.get_float32_matmul_precision() == "highest"
    assert torch.backends.cudnn.allow_tf32 is True


def test_a_users_legacy_setting_comes_back():
    torch.set_float32_matmul_precision("medium")
    torch.backends.cudnn.allow_tf32 = False
    with float32_mode(True):
        pass
    assert torch.get_float32_matmul_precision() == "medium"
    assert torch.backends.cudnn.allow_tf32 is False


@needs_new_api
def test_a_users_new_api_setting_neither_raises_nor_is_lost():
    torch.backends.cuda.matmul.fp32_precision = "tf32"  # what a conftest beside device_bench may do
    with pytest.raises(RuntimeError, match="mix of the legacy and new APIs"):
        torch.get_float32_matmul_precision()  # torch's own refusal: the legacy getter cannot answer here
    before = new_api()
    for tf32 in (False, True):
        with float32_mode(tf32):
            assert torch.backends.cuda.matmul.fp32_precision == ("tf32" if tf32 else "ieee")
            assert torch.backends.cudnn.conv.fp32_precision == ("tf32" if tf32 else "ieee")
            # code reading the legacy getters inside a case (Inductor's autotuning cache) gets an answer
            assert torch.get_float32_matmul_precision() == ("high" if tf32 else "highest")
            assert torch.backends.cudnn.allow_tf32 is tf32
        assert new_api() == before


@needs_new_api
def test_ieee_is_stated_even_where_a_global_tf32_would_be_inherited():
    torch.backends.fp32_precision = "tf32"
    with float32_mode(False):
        assert torch.backends.cuda.matmul.fp32_precision == "ieee"
        assert torch.backends.cudnn.conv.fp32_precision == "ieee"
    assert torch.backends.fp32_precision == "tf32"


@needs_new_api
def test_every_new_api_attribute_comes_back_exactly():
    values = {"cuda.matmul": "ieee", "cudnn.conv": "ieee", "cudnn.rnn": "tf32", "mkldnn.matmul": "bf16"}
    for path, value in values.items():
        backend(path).fp32_precision = value
    with float32_mode(True):
        pass
    assert new_api() == values


def test_none_leaves_the_callers_modes_alone():
    torch.set_float32_matmul_precision("high")
    with float32_mode(None):
        assert torch.get_float32_matmul_precision() == "high"
    assert torch.get_float32_matmul_precision() == "high"
