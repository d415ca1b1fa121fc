"""cdynamo._compat's torch version checks, driven by version strings (no other torch needed):
too old raises ImportError naming the supported range, 2.13.x-2.15.x pass silently, newer ones
give one TorchVersionWarning naming the tested releases; and the C++ standard per release."""
import sys
import warnings

import pytest
import torch

from cdynamo import _compat


@pytest.mark.parametrize("version", ["2.13.0", "2.13.0+cpu", "2.14.1+cu130", "2.15.0+cu132",
                                     "2.15.7", "2.13.0a0+gitabc"])
def test_supported_releases_pass(version):
    assert _compat.check_torch_version(version) is None


@pytest.mark.parametrize("version", ["2.12.1", "2.12.0+cpu", "1.13.1", "2.0"])
def test_older_releases_raise_naming_the_range(version):
    with pytest.raises(ImportError) as e:
        _compat.check_torch_version(version)
    msg = str(e.value)
    assert version in msg and "2.13" in msg and "2.15" in msg
    assert "torch>=2.13,<2.16" in msg


@pytest.mark.parametrize("version", ["2.16.0", "2.16.0a0+git1234", "2.16.0.dev20270101",
                                     "3.0.0"])
def test_newer_releases_warn_naming_the_tested_ones(version):
    msg = _compat.check_torch_version(version)
    assert msg is not None and version in msg
    for tested in _compat.TESTED_RELEASES:
        assert tested in msg


def test_unreadable_version_warns():
    msg = _compat.check_torch_version("unknown")
    assert msg is not None and "unknown" in msg


def test_parse_torch_version():
    assert _compat.parse_torch_version("2.15.0+cu132") == (2, 15, 0)
    assert _compat.parse_torch_version("2.16.0.dev20270101") == (2, 16, 0)
    assert _compat.parse_torch_version("2.14") == (2, 14, 0)
    with pytest.raises(ValueError, match="MAJOR.MINOR"):
        _compat.parse_torch_version("nightly")


def test_tested_releases_match_the_range():
    assert _compat.parse_torch_version(_compat.TESTED_RELEASES[0])[:2] == _compat.MIN_SUPPORTED
    assert _compat.parse_torch_version(_compat.TESTED_RELEASES[-1])[:2] == _compat.NEWEST_TESTED


def test_newer_torch_warns_once(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.17.0")
    monkeypatch.setattr(_compat, "_warned", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _compat.check_installed_torch()
        _compat.check_installed_torch()
    hits = [w for w in caught if issubclass(w.category, _compat.TorchVersionWarning)]
    assert len(hits) == 1 and "2.17.0" in str(hits[0].message)


def test_older_torch_import_error(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.12.1")
    with pytest.raises(ImportError, match="2.13 to 2.15"):
        _compat.check_installed_torch()


def test_installed_torch_is_supported_silently():
    assert _compat.check_torch_version(torch.__version__) is None


@pytest.mark.parametrize("version,std", [("2.13.0", "c++17"), ("2.14.1", "c++20"),
                                         ("2.15.0+cu132", "c++20"), ("2.16.0a0", "c++20")])
def test_cxx_std(version, std):
    assert _compat.cxx_std(version) == std


def test_unsupported_python_is_refused_by_name():
    import cdynamo
    for v in ((3, 10, 14), (3, 14, 0), (3, 9, 1)):
        with pytest.raises(ImportError, match=r"supports CPython 3\.11, 3\.12 and 3\.13, not "
                                              + r"Python " + r"\.".join(map(str, v))):
            cdynamo._check_python(v)
    for v in ((3, 11, 7), (3, 12, 1), (3, 13, 0)):
        cdynamo._check_python(v)
    cdynamo._check_python(sys.version_info)   # the running one
