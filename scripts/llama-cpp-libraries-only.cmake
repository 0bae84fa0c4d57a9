# Read by CMake right after llama.cpp's own project() call (`make setup` passes it to llama-cpp-python's build as
# CMAKE_PROJECT_llama.cpp_INCLUDE). llama-cpp-python loads libllama and libggml only, yet its CMakeLists forces
# llama.cpp's common library on: libllama-common and the HTTP client under it, a third of the build, installed
# beside the package and never loaded. A normal variable shadows that cache entry in llama.cpp's scope, so
# neither is built; libllama and libggml are compiled from the same sources with the same flags.
set(LLAMA_BUILD_COMMON OFF)
