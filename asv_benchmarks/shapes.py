"""The reference workloads of docs/semantics.md §10 (NHWC, float32 unless said)."""
from tfcompat.conv.problem import conv_output_size

RESIZE = {  # id: (images shape, dy shape)
    "R1": ((8, 64, 64, 64), (8, 128, 128, 64)),
    "R2": ((8, 128, 128, 64), (8, 64, 64, 64)),
    "R3": ((4, 32, 32, 21), (4, 256, 256, 21)),
    "R4": ((2, 34, 25, 256), (2, 68, 50, 256)),
}
INTERP = {  # id: (src NXC shape, diff_dst NXC shape)
    "I1": ((2, 16, 16, 16, 32), (2, 32, 32, 32, 32)),
}
CONV = {  # id: (x shape NHWC, filter HWIO, stride, padding)
    "C1": ((8, 56, 56, 64), (3, 3, 64, 64), 1, "SAME"),
    "C2": ((8, 64, 64, 64), (3, 3, 64, 128), 2, "SAME"),
    "C3": ((16, 32, 32, 128), (5, 5, 128, 64), 2, "SAME"),
    "C4": ((8, 28, 28, 256), (1, 1, 256, 512), 1, "VALID"),
    "C5": ((4, 272, 272, 32), (2, 2, 32, 64), 2, "VALID"),
}


def conv_out(x, w, s, pad):
    """dy's shape (NHWC) for x, filter w, stride s and padding 'SAME' or 'VALID'."""
    oh = conv_output_size(x[1], w[0], s, 1, pad.lower())[0]
    ow = conv_output_size(x[2], w[1], s, 1, pad.lower())[0]
    return (x[0], oh, ow, w[3])
