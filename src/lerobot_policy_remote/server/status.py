"""What a replica says about itself: the status reply (the control plane's status queryable), /healthz's verdict,
and where /healthz and /metrics listen. A mixin of `PolicyServer` (server/service.py wires and runs the lifecycle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..wire.messages import ServerStatus

if TYPE_CHECKING:
    from .backend_base import Backend
    from .capabilities import Capabilities
    from .cordon import Cordon
    from .lifecycle import Lifecycle
    from .load import LoadGauge
    from .manifest import Manifest
    from .metrics import HealthServer
    from .rate import RequestRate
    from .sessions import Registry
    from .worker import Worker


class StatusReports:
    """Status and health methods of `PolicyServer`; typed by the members they read."""

    manifest: Manifest
    caps: Capabilities
    backend: Backend
    replica: str
    batch_limit: int
    registry: Registry
    lifecycle: Lifecycle
    load: LoadGauge
    requests_rate: RequestRate
    cordon: Cordon
    worker: Worker
    health: HealthServer | None
    warmed_up: bool
    router_refusal: str

    @property
    def health_port(self) -> int:
        return self.health.port if self.health else 0

    def status(self, sessions: bool = True) -> ServerStatus:
        """`sessions=False`: without the session list (a robot's discovery asks so: `wire.keys.BRIEF_STATUS`)."""
        c = self.caps
        stats = self.worker.stats
        return ServerStatus(
            replica=self.replica,
            model=self.backend.model_info,
            service=self.manifest.service,
            default_task=self.manifest.default_task,
            pin_task=self.manifest.pin_task,
            serving_mode=c.serving_mode,
            max_sessions=c.max_sessions,
            active_sessions=self.registry.count(),
            load=self.load.value,
            supports_rtc=c.supports_rtc,
            chunk_size=c.chunk_size,
            trained_fps=c.trained_fps,
            inference_ms_p50=stats.pass_ms_p50(),
            action_names=list(c.action_names),
            image_features=list(c.image_keys),
            state_dim=c.state_dim,
            schema_min=c.schema_min,
            schema_max=c.schema_max,
            metrics_url=self.metrics_url(),
            draining=self.lifecycle.draining,
            warmed_up=self.warmed_up,
            sessions=[s.info() for s in self.registry.all()] if sessions else [],
            max_batch=self.batch_limit,
            batch_size_mean=stats.mean_batch(),
            chunks_per_s=stats.chunks_per_s(),
            requests_per_s=round(self.requests_rate.value, 3),
            cordoned=self.cordon.on,
            engine=self.backend.engine_stats().path,
        )

    def endpoints_line(self) -> str:
        """Where /healthz and /metrics listen, in the start line (and whether only this machine can reach them)."""
        if not self.health:
            return "healthz=off metrics=off (health_port=0)"
        host = self.manifest.health_host
        base = f"http://{host}:{self.health_port}"
        scope = (
            " (this machine only: health_host=0.0.0.0 to scrape from elsewhere)"
            if host in ("127.0.0.1", "localhost", "::1")
            else ""
        )
        return f"healthz={base}/healthz metrics={base}/metrics{scope}"

    def worker_alive(self) -> bool:
        return self.worker.alive()

    def healthy(self) -> tuple[bool, str]:
        if self.lifecycle.draining:
            return False, "draining"
        if self.router_refusal:
            return False, self.router_refusal
        if not self.worker_alive():
            err = self.worker.error
            return False, "inference worker is not running" + (f": {err}" if err else "")
        return True, "ok"

    def metrics_url(self) -> str:
        if not self.health:
            return ""
        host = self.manifest.advertise_host or self.manifest.health_host
        return f"http://{host}:{self.health_port}/metrics"
