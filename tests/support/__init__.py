"""Helpers shared by the tests: real processes with time bounds, ended by PID."""
