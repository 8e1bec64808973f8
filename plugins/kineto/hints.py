"""How to make the PyTorch profiler record what a rule lacks (Reader.collect), in English and
Chinese."""

STEPS = (
    "mark iterations: profile with schedule=torch.profiler.schedule(...) and call prof.step() "
    "once per iteration (ProfilerStep#N spans)"
)
GPU = (
    "if the job runs on a GPU, profile it too: "
    "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"
)
DISTRIBUTED = "profile the distributed run itself (torch.distributed collectives)"
MESSAGE_SIZES = "record_shapes=True (collective message sizes)"
GPU_WITHOUT_COPIES = (
    "host<->device copies inside the profiled steps (the GPU was profiled, and this trace "
    "holds none)"
)
"""The hint for the copies' host memory of a trace with GPU activity: the class's hint,
profiling the GPU too, would be wrong advice there."""
UNLABELLED_COPIES = (
    "host<->device copies that name their host memory (this trace's copies do not say "
    "pinned or pageable, as ROCm traces do not)"
)
"""The same hint where the trace holds host<->device copies that name neither side's memory
(`Memcpy DtoH (Device -> Host)`): 'this trace holds none' would be false."""

COLLECT = {
    "steps": STEPS,
    # one text for the three, so a CPU-only trace lists it once; conditional, as a trace
    # without device events may come from a job that has no GPU at all (CPU, gloo)
    **dict.fromkeys(("device_ops", "device_ops.start_us", "device_ops.host_memory"), GPU),
    **dict.fromkeys(
        ("memory", "memory.reserved_bytes", "memory.capacity_bytes", "oom_events"),
        "profile_memory=True",
    ),
    "host_ops.input_shapes": "record_shapes=True",
    "comm_ops": DISTRIBUTED,
    "comm_ops.bytes": MESSAGE_SIZES,
}
COLLECT_ZH = {
    STEPS: "标记迭代：用 schedule=torch.profiler.schedule(...) 采集，并在每个迭代调用一次 "
    "prof.step()（ProfilerStep#N 区间）",
    GPU: "若作业运行在 GPU 上，同时采集 GPU：activities=[ProfilerActivity.CPU, "
    "ProfilerActivity.CUDA]",
    DISTRIBUTED: "采集分布式训练本身（torch.distributed 集合通信）",
    MESSAGE_SIZES: "record_shapes=True（集合通信的消息大小）",
    GPU_WITHOUT_COPIES: "被采集的迭代中 Host 与 Device 之间的拷贝"
    "（已采集 GPU，但本 trace 中没有拷贝）",
    UNLABELLED_COPIES: "标明 Host 内存类型的 Host 与 Device 之间的拷贝"
    "（本 trace 中的拷贝没有说明是锁页内存还是可分页内存，ROCm 的 trace 不记录这一点）",
}
