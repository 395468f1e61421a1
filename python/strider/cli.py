"""The Loader's options on a Python script's command line, as the apps take them:

    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    strider.add_loader_arguments(parser, defaults={"batch_size": 64, "seed": 0})
    arguments = parser.parse_args()            # ... --sampler weighted --batch-size 128 --engine direct
    loader = strider.Loader(arguments.data, **strider.loader_arguments(arguments))

One `--name` per option of strider.loader_options() (the library's table, so an option added there is
an argument here), typed from the table: int options take ints (`--batch-size` also takes `all`),
flags are switches, the rest strings; the help is the table's. An option left out keeps the
Loader's default (or the one given in `defaults`).
"""

import argparse

from . import _strider

GROUP_TITLE = "Loader options"
_KEYWORDS_ATTRIBUTE = "_strider_loader_keywords"  # where the namespace records the options added


def _batch_size(text):
    """--batch-size: a count, or 'all' (one batch of the whole epoch, 0 for the Loader)."""
    if text == "all":
        return 0
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a count or 'all', got {text!r}") from None


def _flag_action(default):
    """A flag that is off by default is a switch (--odirect); one that `defaults` turns on also takes
    --no-NAME."""
    return argparse.BooleanOptionalAction if default else "store_true"


def add_loader_arguments(parser, defaults=None, exclude=("data",), title=GROUP_TITLE):
    """Adds an argument group `title` to `parser` (an argparse.ArgumentParser) with one `--name` per
    Loader option, but those whose keyword is in `exclude` (the dataset, by default: a script names
    its own data arguments). `defaults` ({keyword: value}) replaces the Loader's defaults; a keyword
    that is not an option raises strider.UsageError. Returns the group. Not collective.
    """
    options = [option for option in _strider.loader_options() if option["keyword"] not in exclude]
    keywords = [option["keyword"] for option in options]
    defaults = dict(defaults or {})
    unknown = sorted(set(defaults) - set(keywords))
    if unknown:
        raise _strider.UsageError(f"defaults names no Loader option: {', '.join(unknown)} "
                                  "(see strider.loader_options())")
    group = parser.add_argument_group(title)
    for option in options:
        keyword = option["keyword"]
        default = defaults.get(keyword, option["default"])
        flag = "--" + option["name"]
        help_text = option["help"]
        if option["type"] == "bool":
            group.add_argument(flag, dest=keyword, action=_flag_action(default), default=bool(default),
                               help=help_text)
            continue
        if keyword == "batch_size":
            value_type = _batch_size
        elif option["type"] == "int":
            value_type = int
        else:
            value_type = str
        shown = "(default: %(default)s)" if default is not None else ""
        group.add_argument(flag, dest=keyword, type=value_type, default=default, metavar=keyword.upper(),
                           help=f"{help_text} {shown}".rstrip())
    parser.set_defaults(**{_KEYWORDS_ATTRIBUTE: tuple(keywords)})
    return group


def loader_arguments(namespace):
    """The keywords for strider.Loader from what parse_args() returned (`namespace`, after
    add_loader_arguments): every option the group added whose value is not None. Not collective.
    Raises strider.UsageError for a namespace of a parser without the group."""
    keywords = getattr(namespace, _KEYWORDS_ATTRIBUTE, None)
    if keywords is None:
        raise _strider.UsageError("this namespace has no Loader options: call strider.add_loader_arguments(parser) "
                                  "before parse_args()")
    values = vars(namespace)
    return {keyword: values[keyword] for keyword in keywords if values.get(keyword) is not None}
