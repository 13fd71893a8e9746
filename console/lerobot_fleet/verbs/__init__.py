"""Verbs for scripts: status, watch, drain, cordon, reset, doctor and the robots' Prometheus exporter."""
