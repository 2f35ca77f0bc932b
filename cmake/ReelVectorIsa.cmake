# Element-wise kernels compiled once per x86-64 vector instruction set and picked at run time
# (reel/layers/vector_isa.h): reel_vector_isa_sources(AVX512 a.cc ... AVX2 b.cc BASELINE c.cc) gives
# each source its set's flags, -O3 and -fno-trapping-math (which lets GCC if-convert selects and
# vectorise; results are unchanged). Call it in the folder whose target lists the sources (source
# properties are per folder). Elsewhere than x86-64 all three are the baseline build.
function(reel_vector_isa_sources)
  cmake_parse_arguments(ARG "" "" "AVX512;AVX2;BASELINE" ${ARGN})
  set(common -O3 -fno-trapping-math)
  set(avx512 "")
  set(avx2 "")
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    set(avx512 -mavx512f -mavx512dq -mavx512bw -mavx512vl -mavx2 -mfma -mprefer-vector-width=512)
    set(avx2 -mavx2 -mfma)
  endif()
  set_source_files_properties(${ARG_AVX512} PROPERTIES COMPILE_OPTIONS "${common};${avx512}")
  set_source_files_properties(${ARG_AVX2} PROPERTIES COMPILE_OPTIONS "${common};${avx2}")
  set_source_files_properties(${ARG_BASELINE} PROPERTIES COMPILE_OPTIONS "${common}")
endfunction()
