"""Chrome/Kineto traces of torch.profiler: streamed events, kernel classes, the summary, several ranks."""
