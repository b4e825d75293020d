// The translation unit that builds a precompiled header (cmake/mx_pch.cmake); it has no code.
