"""Every host in the registry: what the runner asks of each adapter."""

from __future__ import annotations


def test_every_registered_host_says_whether_its_stream_ids_are_the_models() -> None:
    # provider/served.py marks forged events only where the stream's call ids are the model's own
    from pytest_atlante.hosts.names import HOST_NAMES
    from pytest_atlante.hosts.registry import host_for

    assert {name: host_for(name).stream_call_ids for name in HOST_NAMES} == {
        "claude-code": True, "opencode": True, "codex": False, "gemini-cli": False}


def test_every_registered_host_takes_the_arguments_the_host_protocol_names() -> None:
    # The registry imports adapters by name, so mypy never sees them as a Host: a method whose
    # parameters drift from the protocol (one added to it later) fails only at run time.
    import inspect

    from pytest_atlante.hosts.base import Host
    from pytest_atlante.hosts.names import HOST_NAMES
    from pytest_atlante.hosts.registry import host_for

    methods = [name for name, value in vars(Host).items() if inspect.isfunction(value) and not name.startswith("_")]
    assert "provider_endpoint" in methods
    for host_name in HOST_NAMES:
        adapter = host_for(host_name)
        for method in methods:
            wanted = list(inspect.signature(getattr(Host, method)).parameters)[1:]
            assert list(inspect.signature(getattr(adapter, method)).parameters) == wanted, (host_name, method)
