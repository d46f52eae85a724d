/* The coordinate rules of one resized axis: the one definition of their codes. Cython exports
 * this enum to Python as tfcompat._kernels.Rule (an IntEnum), which tfcompat/_resample.py
 * uses; docs/semantics.md gives each rule's formula.
 */
#ifndef TFCOMPAT_RULES_H
#define TFCOMPAT_RULES_H

enum tfc_rule {
    /* linear: two taps per resized index */
    TFC_LINEAR_HALF_PIXEL = 0,       /* TF HalfPixelScaler: s = (x + 0.5f) * scale - 0.5f */
    TFC_LINEAR_ALIGN_CORNERS = 1,    /* TF LegacyScaler with the align-corners scale */
    TFC_LINEAR_ASYMMETRIC = 2,       /* TF LegacyScaler: s = x * scale */
    TFC_LINEAR_PYTORCH_HALF_PIXEL = 3, /* half pixel, but s = 0 when the resized axis is 1 long */
    TFC_LINEAR_ORT_HALF_PIXEL = 4,   /* ORT ResizeGrad: s = max(0, scale*(x + 0.5) - 0.5) */
    TFC_LINEAR_ORT_ALIGN_CORNERS = 5, /* ORT ResizeGrad: s = scale * x, scale (I-1)/(O-1) or 0 */
    /* nearest: one source index per resized index */
    TFC_NEAREST_HALF_PIXEL = 10,     /* TF HalfPixelScalerForNN, then floorf */
    TFC_NEAREST_ALIGN_CORNERS = 11,  /* TF LegacyScaler, then roundf */
    TFC_NEAREST_ASYMMETRIC = 12,     /* TF LegacyScaler, then floorf */
    TFC_NEAREST_ALIGN_HALF = 13      /* TF's grad with both flags: roundf((x + 0.5f) * scale) */
};

#endif
