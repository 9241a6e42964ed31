"""The sandbox's settings in this process: the settings tree's `sandbox` section, handed over once
by the worker that starts (`configure`, from `sam worker compile|wafer`); the defaults until then.
The worker side only: the child never imports it."""

from __future__ import annotations

from sam_domain.sandbox import SandboxOptions

_current = SandboxOptions()


def configure(options: SandboxOptions) -> None:
    """Use `options` for every sandbox this process starts from now on."""
    global _current
    _current = options


def current() -> SandboxOptions:
    """The options in use (the defaults unless `configure` was called)."""
    return _current
