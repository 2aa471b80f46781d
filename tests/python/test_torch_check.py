"""The torch version check run before the extension loads (neuronsim/_torch_check.py)."""

import sys
import types

import pytest
from neuronsim import _torch_check
from neuronsim._torch_check import TorchVersionError, check_torch_version, mismatch


def test_same_release_with_or_without_local_tag_matches():
    assert mismatch("2.13.0", "2.13.0+cpu") is None
    assert mismatch("2.13.0+cpu", "2.13.0") is None


def test_other_release_names_both_versions_and_the_fix():
    message = mismatch("2.13.0+cpu", "2.12.1")
    assert "built against torch 2.13.0+cpu" in message
    assert "torch 2.12.1 is installed" in message
    assert "pip install torch==2.13.0" in message


def test_check_raises_an_import_error_and_keeps_it_to_one_line(monkeypatch):
    built = types.ModuleType("neuronsim._build_info")
    built.TORCH_VERSION = "2.13.0"
    monkeypatch.setitem(sys.modules, "neuronsim._build_info", built)
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    check_torch_version("2.13.0+cpu")
    with pytest.raises(TorchVersionError, match="torch 2.11.0 is installed") as info:
        check_torch_version("2.11.0")
    assert isinstance(info.value, ImportError)
    assert getattr(sys.excepthook, "_neuronsim", False)


def test_uncaught_mismatch_prints_one_line(capsys, monkeypatch):
    hook = _torch_check._one_line_if_uncaught(sys.__excepthook__)
    hook(TorchVersionError, TorchVersionError("built against torch X"), None)
    assert capsys.readouterr().err == "neuronsim: error: built against torch X\n"
