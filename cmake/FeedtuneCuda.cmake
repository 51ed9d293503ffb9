# Decides whether the CUDA backend is built (FEEDTUNE_WITH_CUDA = AUTO | ON | OFF)
# and sets FEEDTUNE_HAVE_CUDA. The runtime is linked statically so that the
# binary starts on machines without a GPU driver; the host-sim backend is then used.
set(FEEDTUNE_HAVE_CUDA OFF)
if(NOT FEEDTUNE_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Ampere and Hopper (A100, H100/H200), plus PTX for newer parts.
      set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
    endif()
    set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
    # CMake 3.25 knows no C++20 flag for nvcc; the CUDA sources need only C++17.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(FEEDTUNE_HAVE_CUDA ON)
    message(STATUS "feedtune: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION})")
  elseif(FEEDTUNE_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "FEEDTUNE_WITH_CUDA=ON but no CUDA compiler was found; install the CUDA Toolkit "
                        "or set CMAKE_CUDA_COMPILER, or configure with -DFEEDTUNE_WITH_CUDA=OFF")
  else()
    message(STATUS "feedtune: CUDA backend OFF (no nvcc found)")
  endif()
endif()
