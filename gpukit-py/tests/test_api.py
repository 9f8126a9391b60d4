"""The public surface: every public name has a docstring and a type stub, and `help` is useful."""

import ast
import pathlib
import pydoc

import gpukit as gk

STUB = pathlib.Path(gk.__file__).with_name("_gpukit.pyi")


def stub_names():
    tree = ast.parse(STUB.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def public():
    skip = {"llm", "audio", "tts", "cat", "__version__"}
    return [n for n in gk.__all__ if n not in skip]


def test_every_public_name_has_a_stub():
    missing = sorted(set(public()) - stub_names())
    assert not missing, f"no stub for {missing}"
    assert {"load", "Model", "Tokenizer", "TextStream", "Voice", "load_voice"} <= stub_names()


def test_every_public_callable_and_method_has_a_docstring():
    undocumented = []
    for name in public():
        obj = getattr(gk, name)
        if isinstance(obj, gk.dtype):
            continue
        if not (obj.__doc__ or "").strip():
            undocumented.append(name)
        if isinstance(obj, type):
            for attr, member in vars(obj).items():
                if attr.startswith("_") or not callable(member) and not isinstance(member, property):
                    continue
                if not (getattr(member, "__doc__", "") or "").strip():
                    undocumented.append(f"{name}.{attr}")
    audio = [getattr(gk.audio, n) for n in gk.audio.__all__]
    for obj in (gk.llm.Model, gk.llm.Tokenizer, gk.llm.TextStream, gk.llm.load, *audio, gk.tts.load):
        if not (obj.__doc__ or "").strip():
            undocumented.append(obj.__name__)
    for attr, member in vars(gk.tts.Voice).items():
        if not attr.startswith("_") and not (getattr(member, "__doc__", "") or "").strip():
            undocumented.append(f"tts.Voice.{attr}")
    assert not undocumented, f"no docstring: {undocumented}"


def test_help_shows_signature_shapes_and_errors():
    text = pydoc.render_doc(gk.matmul, renderer=pydoc.plaintext)
    assert "matmul(a, b, *, out=None)" in text
    assert "[m, k]" in text
    text = pydoc.render_doc(gk.llm.load, renderer=pydoc.plaintext)
    assert "Raises" in text and "device" in text
