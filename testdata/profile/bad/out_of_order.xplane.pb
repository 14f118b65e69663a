
D/device:TPU:0XLA Opsè"ô
"d
"fusion.1