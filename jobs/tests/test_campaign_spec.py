"""Spec parsing and option checking: every bad spec gives one line naming the key and what is
accepted, and the command line exits 2 without writing anything."""

import os

import pytest

from campaign_helpers import BASIC, HELP, fake_dtbench, write_spec
from dtbench_campaign import cli, dtoptions
from dtbench_campaign.spec import SpecError, load, time_seconds


def test_basic_spec_and_defaults(tmp_path):
    s = load(write_spec(tmp_path, BASIC), cwd=str(tmp_path))
    assert s.name == "t" and s.output == os.path.join(str(tmp_path), "OUT")
    assert s.nodes == [1, 2] and s.tasks_per_node == [2] and s.gpus_per_node == [0]
    assert s.options == {"model": ["lenet"], "exchange": ["sync", "mixed"], "batch": [64],
                         "iters": [10]}
    assert s.launchers == ["srun"] and s.repeats == 1
    assert (s.time, s.time_seconds, s.signal_before, s.array, s.chain) == ("00:30:00", 1800, 120, True, False)


def test_default_output_is_results_name(tmp_path):
    s = load(write_spec(tmp_path, '[campaign]\nname = "abc"\n'), cwd=str(tmp_path))
    assert s.output == os.path.join(str(tmp_path), "results", "abc")


@pytest.mark.parametrize("text,secs", [("5", 300), ("5:30", 330), ("01:00:00", 3600),
                                       ("1-0", 86400), ("1-2:03", 93780), ("1-02:03:04", 93784),
                                       ("1h", None), ("", None), ("1:2:3:4", None)])
def test_slurm_time_formats(text, secs):
    assert time_seconds(text) == secs


BAD = [
    ('[campaign]\nname = "x"\n[sweep]\nnodes = 1\n', "sweep: unknown table; accepted: [campaign]"),
    ('[resources]\nnodes = 1\n', "campaign: missing"),
    ('[campaign]\n', "campaign.name: missing"),
    ('[campaign]\nname = "a b"\n', "campaign.name: 'a b' is not accepted"),
    ('[campaign]\nname = "x"\nfoo = 1\n', "campaign.foo: unknown key; accepted: name, "),
    ('[campaign]\nname = "x"\n[resources]\nnode = 2\n', "resources.node: unknown key; accepted: nodes"),
    ('[campaign]\nname = "x"\n[resources]\nnodes = 0\n', "resources.nodes: 0 is not accepted; accepted: a positive integer"),
    ('[campaign]\nname = "x"\n[resources]\nnodes = []\n', "resources.nodes: an empty list"),
    ('[campaign]\nname = "x"\n[resources]\nnodes = [1, 1]\n', "resources.nodes: [1, 1] lists a value twice"),
    ('[campaign]\nname = "x"\n[resources]\nnodes = "2"\n', "resources.nodes: '2' is not accepted"),
    ('[campaign]\nname = "x"\n[resources]\ngpus_per_node = -1\n', "resources.gpus_per_node: -1 is not accepted; accepted: a non-negative"),
    ('[campaign]\nname = "x"\n[resources]\ntime = "1h"\n', "resources.time: '1h' is not accepted; accepted: MM, MM:SS"),
    ('[campaign]\nname = "x"\n[resources]\nsignal_before = 0\n', "resources.signal_before: 0 is not accepted; accepted: seconds, 1 to 65535"),
    ('[campaign]\nname = "x"\n[resources]\narray = "yes"\n', "resources.array: 'yes' is not accepted; accepted: true or false"),
    ('[campaign]\nname = "x"\n[resources]\nsbatch_args = ["--array=1-3"]\n', "resources.sbatch_args: '--array=1-3' is set by dtbench-campaign"),
    ('[campaign]\nname = "x"\nlauncher = "ssh"\n', "campaign.launcher: 'ssh' is not accepted; accepted: srun, mpirun"),
    ('[campaign]\nname = "x"\nrepeats = 0\n', "campaign.repeats: 0 is not accepted"),
    ('[campaign]\nname = "x"\n[options]\nmodel = []\n', "options.model: an empty list"),
    ('[campaign]\nname = "x"\n[options]\nmodel = { a = 1 }\n', "options.model: {'a': 1} is not accepted"),
    ('[campaign]\nname = "x"\n[options]\nbatch = 64\nbatch_per_rank = 8\n', "options.batch_per_rank: given together with options.batch"),
    ('[campaign]\nname = "x"\n[options]\nbatch_per_rank = 0\n', "options.batch_per_rank: 0 is not accepted"),
    ('[campaign]\nname = "x"\n[[exclude]]\nmodle = "x"\n', "exclude[0].modle: not a key of this campaign"),
    ('[campaign]\nname = "x"\n[exclude]\nnodes = 1\n', "exclude: write it as [[exclude]]"),
    ('[campaign\nname = "x"\n', "not valid TOML"),
]


@pytest.mark.parametrize("text,message", BAD)
def test_bad_specs_name_the_key_and_what_is_accepted(tmp_path, text, message):
    with pytest.raises(SpecError) as e:
        load(write_spec(tmp_path, text), cwd=str(tmp_path))
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_parse_help_reads_kinds_and_choices():
    opts = dtoptions.parse_help(HELP)
    assert opts["exchange"].kind == "choice" and opts["exchange"].choices == ("sync", "async", "mixed")
    assert opts["batch"].kind == "int" and opts["lr"].kind == "float"
    assert opts["tag"].kind == "text" and opts["overwrite"].kind == "flag"
    assert "help" in opts and "Usage" not in opts


@pytest.mark.parametrize("options,message", [
    ({"modle": ["lenet"]}, "options.modle: not a dtbench option; accepted: model, dataset"),
    ({"exchange": ["ssp"]}, "options.exchange: 'ssp' is not accepted; accepted: sync, async, mixed"),
    ({"batch": [6.5]}, "options.batch: 6.5 is not accepted; accepted: an integer"),
    ({"batch": [True]}, "options.batch: True is not accepted; accepted: an integer"),
    ({"lr": ["fast"]}, "options.lr: 'fast' is not accepted; accepted: a number"),
    ({"overwrite": [True]}, "options.overwrite: set by dtbench-campaign"),
    ({"output": ["x.h5"]}, "options.output: set by dtbench-campaign"),
    ({"tag": [True]}, "options.tag: True is not accepted; accepted: a string"),
])
def test_option_values_are_checked_against_dtbench_help(options, message):
    with pytest.raises(SpecError) as e:
        dtoptions.check(options, dtoptions.parse_help(HELP))
    assert message in str(e.value)


def test_option_check_accepts_good_values():
    dtoptions.check({"model": ["lenet", "resnet50"], "lr": [0.1, 1], "tag": ["x", 3],
                     "batch_per_rank": [8]}, dtoptions.parse_help(HELP))


def test_option_args():
    assert dtoptions.option_args("batch", 64) == ["--batch", "64"]
    assert dtoptions.option_args("overwrite", True) == ["--overwrite"]
    assert dtoptions.option_args("overwrite", False) == []


def _cli(tmp_path, monkeypatch, capsys, *argv):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DTBENCH", fake_dtbench(tmp_path))
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_bad_spec_exits_2_with_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    spec = write_spec(tmp_path, BASIC.replace('"mixed"', '"ssp"'))
    for command in ("plan", "submit", "local"):
        rc, out, err = _cli(tmp_path, monkeypatch, capsys, command, spec)
        assert rc == 2 and out == ""
        assert err.count("\n") == 1 and "options.exchange: 'ssp' is not accepted; accepted: sync, async, mixed" in err
    assert not os.path.exists(os.path.join(str(tmp_path), "OUT"))


def test_cli_dry_run_refusal_is_a_spec_error(tmp_path, monkeypatch, capsys):
    spec = write_spec(tmp_path, BASIC.replace('model = "lenet"', 'model = "resnet50"\ndataset = "mnist"'))
    rc, out, err = _cli(tmp_path, monkeypatch, capsys, "plan", spec)
    assert rc == 2 and "dtbench --dry-run rejects" in err and "mnist is not accepted for resnet50" in err


def test_cli_batch_not_divisible_by_ranks(tmp_path, monkeypatch, capsys):
    spec = write_spec(tmp_path, BASIC.replace("nodes = [1, 2]", "nodes = [1, 3]"))
    rc, out, err = _cli(tmp_path, monkeypatch, capsys, "plan", spec)
    assert rc == 2 and "options.batch: 64 is not accepted for run n3x2_exchange-sync (6 ranks)" in err


def test_cli_unknown_command_and_missing_spec(tmp_path, monkeypatch, capsys):
    rc, out, err = _cli(tmp_path, monkeypatch, capsys, "launch", "x.toml")
    assert rc == 2 and "invalid choice: 'launch'" in err
    rc, out, err = _cli(tmp_path, monkeypatch, capsys, "status", "nothere.toml")
    assert rc == 2 and "nothere.toml: cannot read the spec" in err


def test_cli_missing_dtbench(tmp_path, monkeypatch, capsys):
    spec = write_spec(tmp_path, BASIC)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DTBENCH", "/nonexistent/dtbench")
    assert cli.main(["plan", spec]) == 2
    assert "DTBENCH: '/nonexistent/dtbench' is not an executable program" in capsys.readouterr().err


EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
REAL_DTBENCH = os.environ.get("DTBENCH") or os.path.join(os.path.dirname(EXAMPLES), "..", "src", "dtbench")


@pytest.mark.parametrize("name", sorted(os.listdir(EXAMPLES)))
def test_examples_are_valid_campaigns(name, tmp_path):
    from dtbench_campaign import plan
    spec = load(os.path.join(EXAMPLES, name), cwd=str(tmp_path))
    runs = plan.expand(spec)
    plan.check_runs(runs)
    dtoptions.check(spec.options, dtoptions.parse_help(HELP))  # the options of the merged dtbench
    assert len(runs) >= 4, (name, len(runs))


@pytest.mark.parametrize("name", ["lenet-smoke.toml", "cpu-threads-sweep.toml"])
def test_cpu_examples_are_accepted_by_this_dtbench(name, tmp_path):
    if not os.access(REAL_DTBENCH, os.X_OK):
        pytest.skip("dtbench is not built")
    spec = load(os.path.join(EXAMPLES, name), cwd=str(tmp_path))
    dtoptions.check(spec.options, dtoptions.query_help(REAL_DTBENCH))
