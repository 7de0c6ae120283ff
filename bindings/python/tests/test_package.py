"""Docstrings on every public name and type stubs that cover the public API."""
import ast
import inspect
import pathlib

import tensorasync as ta


def test_every_public_name_has_a_docstring():
    missing = []
    for name in ta.__all__:
        obj = getattr(ta, name)
        if name == "__version__" or name == "dtypes":
            continue
        if not inspect.getdoc(obj):
            missing.append(name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") or not (callable(member) or isinstance(member, property)):
                    continue
                if not inspect.getdoc(member):
                    missing.append(f"{name}.{attr}")
    assert not missing, missing


def test_stubs_cover_the_public_api():
    stub = pathlib.Path(ta.__file__).with_name("__init__.pyi")
    tree = ast.parse(stub.read_text())
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    names |= {t.id for n in tree.body if isinstance(n, (ast.AnnAssign,)) for t in [n.target]}
    missing = [n for n in ta.__all__ if n not in names]
    assert not missing, missing
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    for cname in ("Tensor", "Event", "BlockArray"):
        stubbed = {f.name for f in classes[cname].body if isinstance(f, ast.FunctionDef)}
        public = {a for a in vars(getattr(ta, cname)) if not a.startswith("_")}
        assert public <= stubbed, (cname, public - stubbed)
