import pytest

from fedbound.config import Field, Section, load_config, parse_override
from fedbound.errors import ConfigError

SETTING = Section("setting", (
    Field("N", int, doc="clients", low=1),
    Field("eps", float, low=0, low_open=True),
    Field("delta", float, 0.01, low=0, high=1, low_open=True, high_open=True),
    Field("K", int, None, low=1, optional=True),
))
TRAIN = Section("train", (
    Field("model", str, "mlp", choices=("mlp", "logreg")),
    Field("lr", float, 0.1, low=0, low_open=True),
    Field("eps", float, 1.0, low=0, low_open=True),
    Field("shuffle", bool, True),
))


@pytest.fixture
def cfg_file(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[setting]\nN = 50\neps = 6.0\n\n[train]\nmodel = "logreg"\n')
    return p


def test_load_types_defaults_and_untouched_sections(cfg_file):
    cfg_file.write_text(cfg_file.read_text() + "\n[other]\nx = 1\n")
    cfg = load_config(cfg_file, [SETTING, TRAIN], known_sections=["other"])
    assert cfg["setting"]["N"] == 50 and isinstance(cfg["setting"]["N"], int)
    assert cfg["setting"]["delta"] == 0.01 and cfg["setting"]["K"] is None
    assert cfg["train"]["model"] == "logreg" and cfg["train"]["shuffle"] is True
    assert cfg.raw["other"] == {"x": 1}


def test_overrides_bare_and_dotted(cfg_file):
    cfg = load_config(cfg_file, [SETTING, TRAIN], ["N=20", "setting.eps=2", "K=5", "model=mlp",
                                                   "train.eps=3"])
    assert cfg["setting"]["N"] == 20 and cfg["setting"]["eps"] == 2.0 and cfg["setting"]["K"] == 5
    assert cfg["train"]["model"] == "mlp" and cfg["train"]["eps"] == 3.0


def test_ambiguous_bare_key(cfg_file):
    with pytest.raises(ConfigError, match="ambiguous.*setting.eps.*train.eps"):
        load_config(cfg_file, [SETTING, TRAIN], ["eps=2"])


def test_unknown_key_suggests(cfg_file):
    with pytest.raises(ConfigError, match="did you mean 'eps'"):
        load_config(cfg_file, [SETTING], ["epss=2"])
    bad = cfg_file.parent / "bad.toml"
    bad.write_text("[setting]\nN = 5\neps = 1.0\ndelt = 0.1\n")
    with pytest.raises(ConfigError, match="unknown key 'delt'.*did you mean 'delta'"):
        load_config(bad, [SETTING])


@pytest.mark.parametrize("override, fragment", [
    ("N=0", r"N = 0 is outside its valid range integer in \[1, inf\)"),
    ("N=2.5", "expected an integer"),
    ("setting.eps=-1", r"eps = -1.0 is outside its valid range \(0, inf\)"),
    ("delta=1", r"delta = 1.0 is outside its valid range \(0, 1\)"),
    ("setting.eps=nan", "NaN and infinity"),
    ("model=cnn", "one of 'mlp', 'logreg'"),
    ("shuffle=3", "true or false"),
])
def test_range_and_type_errors_name_key_value_range(cfg_file, override, fragment):
    with pytest.raises(ConfigError, match=fragment):
        load_config(cfg_file, [SETTING, TRAIN], [override])


def test_missing_required_key(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("[setting]\nN = 3\n")
    with pytest.raises(ConfigError, match=r"\[setting\] eps is required"):
        load_config(p, [SETTING])


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml", [SETTING])
    p = tmp_path / "broken.toml"
    p.write_text("[setting\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(p, [SETTING])


def test_parse_override_literals():
    assert parse_override("a=6") == ("a", 6)
    assert parse_override("a=0.01") == ("a", 0.01)
    assert parse_override("a=true") == ("a", True)
    assert parse_override("a=digits") == ("a", "digits")
    assert parse_override('a="x y"') == ("a", "x y")
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_override("novalue")


def test_no_file_only_overrides():
    cfg = load_config(None, [SETTING], ["N=4", "eps=1"])
    assert cfg["setting"]["N"] == 4
