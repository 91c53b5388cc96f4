"""The parts of ``benchmarks/gpu_check.py``, one job to a module (see its docstring)."""
