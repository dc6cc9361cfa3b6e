from app.greeter import greet


def test_greet_uses_the_name() -> None:
    assert greet("Ada") == "Hello, Ada!"


def test_greet_falls_back_to_world() -> None:
    assert greet("   ") == "Hello, world!"
