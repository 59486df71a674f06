"""The model under study: `module:factory` resolved and called, its model and request maker checked."""

from __future__ import annotations

import importlib
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kcontract.errors import UsageError
from kcontract.usercode import UserCodeExit, user_code


@dataclass
class Target:
    """A callable model (dim 0 of its input and output is the batch) and `requests(n, tokens)`, a batch of n
    distinct requests of `tokens` tokens each."""

    label: str
    model: Callable
    requests: Callable


def resolve(spec: str) -> Callable:
    """The factory named `module:attribute`, imported with the current folder first on the path."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(f"TARGET {spec!r}: module:factory expected, such as examples.drift.llama:small")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        with user_code(f"TARGET {spec}: importing {module_name}"):
            module = importlib.import_module(module_name)
    except UserCodeExit as error:
        raise UsageError(str(error)) from None
    except ImportError as error:
        raise UsageError(f"TARGET {spec}: cannot import {module_name} from {Path.cwd()} or the installed packages "
                         f"({error}): run from the folder above it or install it") from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise UsageError(f"TARGET {spec}: {module_name} has no callable {attribute}")
    return factory


def build(spec: str, dtype, device: str, seed: int, context: int = 0) -> Target:
    """Call the factory with the options it accepts; it returns (model, requests) or an object with both."""
    factory = resolve(spec)
    offered = {"dtype": dtype, "device": device, "seed": seed, "context": context or None}
    accepted = inspect.signature(factory).parameters
    if context and "context" not in accepted:
        raise UsageError(f"TARGET {spec}: --context {context}: its factory takes no `context` argument (the cached "
                         f"positions before each request); add one, or leave --context out")
    try:
        with user_code(f"TARGET {spec}: its factory"):
            made = factory(**{k: v for k, v in offered.items() if k in accepted and v is not None})
    except UserCodeExit as error:
        raise UsageError(str(error)) from None
    except Exception as error:  # the user's factory: one line, no traceback
        raise UsageError(f"TARGET {spec}: the factory failed: {type(error).__name__}: "
                         f"{str(error).splitlines()[0] if str(error) else ''}") from None
    model, requests = (made if isinstance(made, tuple) and len(made) == 2
                       else (getattr(made, "model", None), getattr(made, "requests", None)))
    if not callable(model) or not callable(requests):
        raise UsageError(f"TARGET {spec}: the factory must return (model, requests) or an object with .model and "
                         f".requests; it returned {type(made).__name__}")
    return Target(spec, model, requests)
