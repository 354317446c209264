"""A stand-in for torchvision in pdctl's SGLang side environment (CPU only, never used for computation).

Why: SGLang imports torchvision at module level in multimodal helpers that pdctl's differential tests never
call, and the real torchvision's C ops cannot load against a CPU build of torch. Every `torchvision.X.Y`
imports as an empty module whose attributes are inert placeholder classes; calling into them is an error.
"""

import importlib.abc
import importlib.machinery
import sys
import types

__version__ = "0.0.0+pdctl-stub"


class _Inert(type):
    """Placeholder classes: any attribute of one is another placeholder (enum members, nested names)."""

    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert(name, (_Placeholder,), {})


class _Placeholder(metaclass=_Inert):
    def __init__(self, *args, **kwargs):
        raise RuntimeError("torchvision is a stub in pdctl's SGLang side environment")


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        placeholder = _Inert(name, (_Placeholder,), {})
        setattr(self, name, placeholder)
        return placeholder


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        return None


sys.meta_path.insert(0, _Finder())
sys.modules[__name__].__class__ = _StubModule
