#!/usr/bin/env python3
"""Quantizes a GGUF file with llama.cpp's own quantizer (llama-cpp-python's
llama_model_quantize), for the K-format rows of bench/llamacpp-vs.sh: gguf-py writes
only some block types, llama.cpp every mix it ships (Q4_K_M, Q5_K_M, ...).

usage: LLAMACPP_PY bench/llamacpp-quantize.py IN.gguf OUT.gguf TYPE   (TYPE e.g. Q4_K_M)
"""
import ctypes
import sys

import llama_cpp

src, dst, kind = sys.argv[1:4]
params = llama_cpp.llama_model_quantize_default_params()
params.ftype = getattr(llama_cpp, "LLAMA_FTYPE_MOSTLY_" + kind.upper())
params.nthread = 2
r = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params))
sys.exit(1 if r else 0)
