"""strider.cli: the Loader's options as argparse arguments, typed from strider.loader_options(), with
the table's defaults or the script's, and the keywords they give a Loader."""

import argparse

import pytest
import strider
from strider import cli


def parser_with(**arguments):
    parser = argparse.ArgumentParser(prog="train")
    parser.add_argument("--data")
    cli.add_loader_arguments(parser, **arguments)
    return parser


def test_one_argument_per_option_in_one_group():
    parser = parser_with()
    group = next(g for g in parser._action_groups if g.title == "Loader options")
    flags = {action.option_strings[0] for action in group._group_actions}
    table = strider.loader_options()
    assert flags == {"--" + option["name"] for option in table if option["keyword"] != "data"}
    text = parser.format_help()
    assert "Loader options:" in text and "--batch-size BATCH_SIZE" in text and "--no-shuffle" in text


def test_values_are_typed_as_the_table_says():
    arguments = parser_with().parse_args(["--data", "f.h5", "--batch-size", "128", "--seed", "-3", "--no-shuffle",
                                          "--sampler", "weighted", "--class-weights", "1,2.5", "--prefetch", "4"])
    keywords = cli.loader_arguments(arguments)
    assert keywords["batch_size"] == 128 and keywords["seed"] == -3 and keywords["prefetch"] == 4
    assert keywords["no_shuffle"] is True and keywords["odirect"] is False
    assert keywords["sampler"] == "weighted" and keywords["class_weights"] == "1,2.5"
    assert "data" not in keywords  # the script's own argument
    assert cli.loader_arguments(parser_with().parse_args(["--batch-size", "all"]))["batch_size"] == 0


def test_defaults_are_the_tables_or_the_scripts():
    table = {option["keyword"]: option["default"] for option in strider.loader_options()}
    keywords = cli.loader_arguments(parser_with().parse_args([]))
    assert keywords == {k: v for k, v in table.items() if k != "data" and v is not None}
    assert "seed" not in keywords  # None: the Loader draws one
    keywords = cli.loader_arguments(parser_with(defaults={"batch_size": 64, "seed": 0, "no_shuffle": True})
                                    .parse_args([]))
    assert keywords["batch_size"] == 64 and keywords["seed"] == 0 and keywords["no_shuffle"] is True
    turned_off = parser_with(defaults={"no_shuffle": True}).parse_args(["--no-no-shuffle"])
    assert cli.loader_arguments(turned_off)["no_shuffle"] is False


def test_the_keywords_build_a_loader(files):
    arguments = parser_with(defaults={"seed": 4}).parse_args(["--data", files["features"], "--batch-size", "16",
                                                              "--engine", "hdf5"])
    with strider.Loader(arguments.data, **cli.loader_arguments(arguments)) as loader:
        options = loader.options()
        assert options["batch_size"] == 16 and options["seed"] == 4 and options["engine"] == "hdf5"
        assert len(loader) == 7  # 100 samples / 16


@pytest.mark.parametrize("argv, words", [
    (["--batch-sizes", "3"], "unrecognized arguments: --batch-sizes 3"),
    (["--batch-size", "many"], "argument --batch-size: a count or 'all', got 'many'"),
    (["--seed", "1.5"], "argument --seed: invalid int value: '1.5'"),
    (["--prefetch"], "argument --prefetch: expected one argument"),
])
def test_a_bad_argument_is_a_usage_error(capsys, argv, words):
    with pytest.raises(SystemExit) as exit_status:
        parser_with().parse_args(argv)
    assert exit_status.value.code == 2 and words in capsys.readouterr().err


def test_misuse_raises_usage_error():
    with pytest.raises(strider.UsageError, match="defaults names no Loader option: batch_sizes"):
        parser_with(defaults={"batch_sizes": 3})
    with pytest.raises(strider.UsageError, match="add_loader_arguments"):
        cli.loader_arguments(argparse.Namespace(batch_size=3))
    with pytest.raises(argparse.ArgumentError, match="conflicting option string: --seed"):
        parser = argparse.ArgumentParser()
        parser.add_argument("--seed")
        cli.add_loader_arguments(parser)
    parser = argparse.ArgumentParser()  # a script's own --seed: leave the Loader's out
    parser.add_argument("--seed", type=int, default=7)
    cli.add_loader_arguments(parser, exclude=("data", "seed"))
    arguments = parser.parse_args(["--seed", "3"])
    assert arguments.seed == 3 and "seed" not in cli.loader_arguments(arguments)
