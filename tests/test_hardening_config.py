"""Issue 8, items 1, 2, 3, 6, 8 and 9 at the config / ``train_from_config`` level: a typo in a section or an
override is an error with a "did you mean", integers are capped before any cast, training sizes are checked
against documented maxima before anything is built, ``--out`` is checked before training."""

from __future__ import annotations

import pytest

from fedbound.checks import MAX_INT, check_int
from fedbound.config import Field, Section, load_config
from fedbound.errors import ConfigError, ParameterError
from fedbound.tests.test_training_cli import TINY_NBAFL
from fedbound.training import config as tc
from fedbound.validation.recipes.runner import train_from_config

SETTING = Section("nbafl", (Field("N", int, low=1), Field("eps", float, low=0, low_open=True),
                            Field("variant", str, "a")))
TRAIN = Section("train", (Field("lr", float, 0.1, low=0, low_open=True),))


@pytest.fixture
def cfg(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("[nbafl]\nN = 5\neps = 6.0\n\n[train]\nlr = 0.2\n")
    return p


class TestSectionsAndOverrides:
    def test_a_misspelt_section_in_an_override_is_an_error_with_did_you_mean(self, cfg):
        with pytest.raises(ConfigError, match=r"--set 'nbafll.eps=60'.*unknown section 'nbafll'.*"
                                              r"did you mean 'nbafl'"):
            load_config(cfg, [SETTING, TRAIN], ["nbafll.eps=60"])

    def test_an_override_of_a_section_this_command_does_not_read_is_an_error(self, cfg):
        with pytest.raises(ConfigError, match=r"--set 'train.eps=60'.*does not read \[train\]"):
            load_config(cfg, [SETTING], ["train.eps=60"])

    def test_an_override_of_a_missing_key_in_a_read_section_is_an_error(self, cfg):
        with pytest.raises(ConfigError, match=r"\[train\] has no key 'eps'"):
            load_config(cfg, [SETTING, TRAIN], ["train.eps=60"])

    def test_an_unknown_section_in_the_file_is_an_error_a_known_unused_one_is_fine(self, cfg):
        assert load_config(cfg, [SETTING])["nbafl"]["eps"] == 6.0  # [train] is known, just not read
        cfg.write_text(cfg.read_text() + "\n[nbafll]\neps = 60.0\n")
        with pytest.raises(ConfigError, match=r"unknown section \[nbafll\]; did you mean 'nbafl'"):
            load_config(cfg, [SETTING, TRAIN])
        cfg.write_text("[nbafl]\nN = 5\neps = 6.0\n[udp]\nT = 3\n")
        assert load_config(cfg, [SETTING], known_sections=["udp", "train"])["nbafl"]["N"] == 5

    def test_a_key_outside_any_section_is_an_error(self, cfg):
        cfg.write_text("eps = 60.0\n" + cfg.read_text())
        with pytest.raises(ConfigError, match="outside any"):
            load_config(cfg, [SETTING, TRAIN])

    def test_a_bad_override_value_names_the_override_not_the_file(self, cfg):
        with pytest.raises(ConfigError, match=r"^--set 'eps=-1': \[nbafl\] eps = -1"):
            load_config(cfg, [SETTING, TRAIN], ["eps=-1"])

    def test_a_string_key_takes_an_unquoted_number_as_text(self, cfg):
        assert load_config(cfg, [SETTING, TRAIN], ["variant=100"])["nbafl"]["variant"] == "100"

    def test_a_non_utf8_file_is_a_one_line_config_error(self, tmp_path):
        p = tmp_path / "latin1.toml"
        p.write_bytes("[nbafl]\n# caf\xe9\nN = 5\n".encode("latin-1"))
        with pytest.raises(ConfigError, match="not a UTF-8 text file") as info:
            load_config(p, [SETTING])
        assert "\n" not in str(info.value)

    def test_a_directory_as_config_is_a_config_error(self, tmp_path):
        with pytest.raises(ConfigError, match="not a regular file"):
            load_config(tmp_path, [SETTING])


class TestIntegers:
    @pytest.mark.parametrize("value", [2**63 - 1, 2**63, 2**64 + 1, -(2**63), 1e300])
    def test_check_int_caps_before_the_cast(self, value):
        with pytest.raises(ParameterError, match="steps") as info:
            check_int("steps", value, 1)
        assert "1e+12" in str(info.value)

    def test_an_integer_beyond_float_range_is_named_shortly(self):
        with pytest.raises(ParameterError, match=r"^steps = an integer of 401 digits is outside .*1.8e308"):
            check_int("steps", 10**400, 1)

    def test_check_int_keeps_the_cap_itself(self):
        assert int(check_int("steps", MAX_INT, 1)) == MAX_INT

    @pytest.mark.parametrize("text", ["N=9223372036854775807", "N=1e300", "N=10000000000000"])
    def test_an_int_config_key_is_capped_and_says_so(self, cfg, text):
        with pytest.raises(ConfigError, match="caps integer keys at 1e"):
            load_config(cfg, [SETTING, TRAIN], [text])

    def test_a_fractional_value_for_an_int_key_is_refused(self, cfg):
        with pytest.raises(ConfigError, match="expected an integer"):
            load_config(cfg, [SETTING, TRAIN], ["N=2.5"])


@pytest.fixture
def tiny(tmp_path):
    p = tmp_path / "tiny.toml"
    p.write_text(TINY_NBAFL)
    return p


class TestTrainUpFront:
    """Refused before any data is loaded or any round runs (each case would otherwise train or allocate)."""

    @pytest.mark.parametrize("override, key", [
        ("local_steps=1e12", "local_steps"), ("hidden=1e12", "hidden"), ("memory_mb=1e308", "memory_mb"),
        ("lr=1e308", "lr"), ("weight_decay=1e308", "weight_decay"), ("T=1e12", "T"), ("T=2.5", "T"),
        ("nbafll.eps=60", "nbafll"), ("train.eps=60", "eps"),
    ])
    def test_bad_training_settings(self, tiny, tmp_path, override, key):
        with pytest.raises(ConfigError, match=key):
            train_from_config("nbafl", tiny, [override], out=tmp_path / "run")
        assert not (tmp_path / "run").exists()

    def test_out_pointing_at_a_file_is_refused_before_training(self, tiny, tmp_path):
        target = tmp_path / "a_file"
        target.write_text("x")
        with pytest.raises(ConfigError, match="is an existing file"):
            train_from_config("nbafl", tiny, out=target)
        assert target.read_text() == "x"

    def test_overwrite_keeps_a_foreign_folder(self, tiny, tmp_path):
        out = tmp_path / "mine"
        (out / "sub").mkdir(parents=True)
        (out / "precious.txt").write_text("keep")
        (out / "sub" / "notes.md").write_text("keep")
        with pytest.raises(ConfigError, match=r"--overwrite refused.*precious\.txt"):
            train_from_config("nbafl", tiny, out=out, overwrite=True)
        assert (out / "precious.txt").read_text() == "keep" and (out / "sub" / "notes.md").is_file()

    def test_overwrite_replaces_its_own_run(self, tiny, tmp_path):
        out = tmp_path / "run"
        first = train_from_config("nbafl", tiny, out=out)
        assert (out / ".fedbound-run").is_file() and first.summary["rounds_done"] == 3
        again = train_from_config("nbafl", tiny, ["lr=0.1"], out=out, overwrite=True)
        assert again.summary["resumed_from_round"] == 0 and (out / ".fedbound-run").is_file()

    def test_documented_maxima_are_the_field_bounds(self):
        assert tc.TRAIN_SECTION.field("local_steps").high == tc.MAX_LOCAL_STEPS
        assert tc.TRAIN_SECTION.field("hidden").high == tc.MAX_WIDTH
        assert tc.TRAIN_SECTION.field("memory_mb").high == tc.MAX_MEMORY_MB
        with pytest.raises(ConfigError, match=r"T = 2e\+06 .*\[1, 1000000\]"):
            tc.check_rounds("T", 2_000_000)
