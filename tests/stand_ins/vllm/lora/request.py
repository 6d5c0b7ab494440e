"""``vllm.lora.request.LoRARequest``: imported by the harness's vllm model; the stand-in loads no adapter."""


class LoRARequest:
    """A LoRA adapter request (name, id, path); never used by the tests."""

    def __init__(self, lora_name: str, lora_int_id: int, lora_path: str) -> None:
        self.lora_name, self.lora_int_id, self.lora_path = lora_name, lora_int_id, lora_path
