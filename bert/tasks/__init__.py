"""Fine-tuning and pre-training tasks: data, losses, metrics, post-processing."""
