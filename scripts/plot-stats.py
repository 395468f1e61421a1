#!/usr/bin/env python3
"""Draws what strider-train's --json holds: loss and accuracy per epoch, and per-class recall.

    scripts/plot-stats.py RUN.json [OTHER.json] [--labels A,B] [--out stats.png] [--title TEXT]

One run gives one column; two runs are drawn side by side with shared axes, so that a sampler can be
set against another on the same data (the quickstart draws `balanced` beside `distributed`). The top
row is the training loss and accuracy per epoch. The bottom row is the training recall of each class
per epoch (each epoch's "per_class_recall": predictions before each update, over all ranks; a class
the epoch did not train leaves a gap), with the last evaluation's recall (every sample counted once)
in the legend. A file whose epochs lack "per_class_recall" gets the last evaluation's recall as bars
instead, a class under half of the best class's recall marked. Needs matplotlib (Debian:
python3-matplotlib); draws with the Agg backend, so no display is needed. Prints the path of the PNG
it wrote.
"""
import argparse
import json
import os
import sys


def load(path):
    try:
        with open(path) as handle:
            stats = json.load(handle)
    except (OSError, ValueError) as error:
        sys.exit(f"plot-stats: cannot read {path}: {error}")
    if not isinstance(stats, dict) or not isinstance(stats.get("epochs"), list):
        sys.exit(f"plot-stats: {path} is not a strider-train --json (no \"epochs\" list)")
    return stats


def run_label(path):
    """The file's name without its folder and extension (the quickstart names a run's file after its sampler)."""
    return os.path.splitext(os.path.basename(path))[0]


def draw_curves(axis, stats):
    epochs = [entry.get("epoch", index) + 1 for index, entry in enumerate(stats["epochs"])]
    loss = [entry.get("loss") for entry in stats["epochs"]]
    accuracy = [entry.get("accuracy") for entry in stats["epochs"]]
    axis.plot(epochs, loss, marker="o", color="tab:red", label="loss")
    axis.set_xlabel("epoch")
    axis.set_ylabel("training loss", color="tab:red")
    axis.set_xticks(epochs)
    twin = axis.twinx()
    twin.plot(epochs, accuracy, marker="s", color="tab:blue", label="accuracy")
    twin.set_ylim(0, 1.05)
    twin.set_ylabel("training accuracy", color="tab:blue")
    return twin


def as_number(value):
    """A recall as a float; JSON's null (a class without samples) becomes NaN, a gap in the line."""
    return float("nan") if value is None else value


def draw_recall(axis, stats):
    per_epoch = [entry.get("per_class_recall") for entry in stats["epochs"]]
    if per_epoch and all(isinstance(recall, list) for recall in per_epoch):
        epochs = [entry.get("epoch", index) + 1 for index, entry in enumerate(stats["epochs"])]
        evaluated = stats.get("per_class_recall") or []
        for klass in range(max(len(recall) for recall in per_epoch)):
            values = [as_number(recall[klass]) if klass < len(recall) else float("nan") for recall in per_epoch]
            label = f"class {klass}"
            if klass < len(evaluated) and isinstance(evaluated[klass], (int, float)):
                label += f" (evaluation {evaluated[klass]:.2f})"
            axis.plot(epochs, values, marker="o", label=label)
        axis.set_xlabel("epoch")
        axis.set_xticks(epochs)
        axis.legend(loc="center right", fontsize="small")
        axis.set_ylabel("training recall per class")
    else:
        recall = stats.get("per_class_recall") or []
        best = max(recall) if recall else 0
        colours = ["tab:green" if value >= best / 2 else "tab:orange" for value in recall]
        bars = axis.bar([str(klass) for klass in range(len(recall))], recall, color=colours)
        for bar, value in zip(bars, recall):
            axis.annotate(f"{value:.2f}", (bar.get_x() + bar.get_width() / 2, value), ha="center", va="bottom",
                          fontsize="small")
        axis.set_xlabel("class (orange: under half the best class's recall)")
        axis.set_ylabel("recall (last evaluation)")
    axis.set_ylim(0, 1.1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", metavar="STATS.json", help="one or two strider-train --json files")
    parser.add_argument("--labels", help="comma-separated names for the runs (default: the files' names)")
    parser.add_argument("--out", default="stats.png", help="the PNG to write (default: stats.png)")
    parser.add_argument("--title", help="a title above the figure")
    options = parser.parse_args()
    if len(options.runs) > 2:
        parser.error("at most two runs side by side")
    runs = [load(path) for path in options.runs]
    labels = options.labels.split(",") if options.labels else [run_label(path) for path in options.runs]
    if len(labels) != len(runs):
        parser.error(f"--labels names {len(labels)} runs, {len(runs)} given")

    try:
        import matplotlib
    except ImportError:
        sys.exit("plot-stats: matplotlib is missing (Debian: apt-get install python3-matplotlib)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    figure, axes = pyplot.subplots(2, len(runs), figsize=(5.5 * len(runs), 6.5), squeeze=False,
                                   sharey="row", constrained_layout=True)
    for column, (stats, label) in enumerate(zip(runs, labels)):
        twin = draw_curves(axes[0][column], stats)
        if column > 0:
            axes[0][column].set_ylabel("")
        if column < len(runs) - 1:
            twin.set_ylabel("")
        accuracy = stats.get("eval_accuracy")
        subtitle = f" (evaluation accuracy {accuracy:.3f})" if isinstance(accuracy, (int, float)) else ""
        axes[0][column].set_title(f"{label}{subtitle}")
        draw_recall(axes[1][column], stats)
        if column > 0:
            axes[1][column].set_ylabel("")
    if options.title:
        figure.suptitle(options.title)
    figure.savefig(options.out, dpi=90)
    print(f"plot-stats: wrote {options.out}")


if __name__ == "__main__":
    main()
