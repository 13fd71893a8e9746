"""Test kit shipped with the package (in-memory link, fakes, waits, process helpers)."""
