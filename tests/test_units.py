import pytest

from hcsim.errors import ConfigError
from hcsim.units import format_size, parse_size, size_range


@pytest.mark.parametrize("text,expected", [
    ("8", 8), (8, 8), ("64K", 65536), ("64KiB", 65536), ("1M", 1 << 20), ("1MiB", 1 << 20),
    ("1G", 1 << 30), ("2GiB", 2 << 30), ("1kB", 1000), ("1KB", 1000), ("3MB", 3_000_000),
    ("1GB", 10**9), ("0.5K", 512), (" 16 M ", 16 << 20), ("4B", 4),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["0", 0, -8, "-1K", "abc", "1.3", "12Q", "", None, True, 1.5, "0.3K"])
def test_parse_size_rejects_with_one_line_naming_the_value(bad):
    with pytest.raises(ConfigError) as exc:
        parse_size(bad, "size")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("size = ") and repr(bad) in msg


def test_size_range_doubles_inclusive():
    assert size_range("8", "1K", 2) == [8, 16, 32, 64, 128, 256, 512, 1024]
    assert size_range(3, 100, 3) == [3, 9, 27, 81]


def test_size_range_rejects_bad_factor_and_inverted_bounds():
    with pytest.raises(ConfigError, match="factor"):
        size_range(8, 64, 1)
    with pytest.raises(ConfigError, match="max size"):
        size_range("1M", "1K")


def test_format_size():
    assert format_size(65536) == "64K" and format_size(1 << 30) == "1G" and format_size(1000) == "1000"
