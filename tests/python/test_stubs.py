"""The type stubs (python/strider/_strider.pyi) match the built module's signatures, parse as
Python, and name everything the package exports from the extension; py.typed marks the package."""

import ast
import os
import subprocess
import sys

import strider
from conftest import SOURCE_DIR

STUBS = os.path.join(SOURCE_DIR, "python", "strider", "_strider.pyi")


def test_stubs_match_the_modules_signatures():
    result = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "scripts", "python", "gen-stubs.py"), "--check"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_stubs_name_every_export_of_the_extension():
    with open(STUBS) as file:
        tree = ast.parse(file.read())
    declared = {node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    exported = {name for name in strider.__all__ if getattr(getattr(strider, name), "__module__", "") == "strider._strider"}
    assert exported and exported <= declared, exported - declared
    loader = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Loader")
    init = next(node for node in loader.body if isinstance(node, ast.FunctionDef) and node.name == "__init__")
    assert [a.arg for a in init.args.kwonlyargs] == ["comm", "copy", "split", "pin_memory"]


def test_the_package_is_marked_typed():
    assert os.path.exists(os.path.join(SOURCE_DIR, "python", "strider", "py.typed"))
    assert os.path.exists(os.path.join(os.path.dirname(strider.__file__), "py.typed"))
