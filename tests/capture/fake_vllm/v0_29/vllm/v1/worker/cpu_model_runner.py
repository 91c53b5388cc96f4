"""Stand-in CPU runner: a subclass of the V1 GPU runner (its methods' globals are that module's)."""

from __future__ import annotations

from vllm.v1.worker.gpu_model_runner import GPUModelRunner


class CPUModelRunner(GPUModelRunner):
    def warming_up_model(self) -> None:
        self.profile_run()
