# mx_embed_bytes(PATH NAME OUT_DECL OUT_SIZE): a C++ definition `const unsigned char NAME[]`
# holding PATH's bytes (plus a trailing 0) into OUT_DECL, and the byte count into OUT_SIZE. Used
# by the script-mode generators that build files into the binary (the web page, the tuned MoE
# configs).
function(mx_embed_bytes PATH NAME OUT_DECL OUT_SIZE)
  file(READ "${PATH}" hex HEX)
  string(LENGTH "${hex}" n_hex)
  math(EXPR n "${n_hex} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "((0x..,){24})" "\\1\n" bytes "${bytes}")
  set(${OUT_DECL} "const unsigned char ${NAME}[] = {\n${bytes}0x00};\n" PARENT_SCOPE)
  set(${OUT_SIZE} ${n} PARENT_SCOPE)
endfunction()

# mx_write_if_changed(PATH TEXT): rewrites PATH only when TEXT differs, so an unchanged input
# does not rebuild what includes it.
function(mx_write_if_changed PATH TEXT)
  if(EXISTS "${PATH}")
    file(READ "${PATH}" old)
    if(old STREQUAL TEXT)
      return()
    endif()
  endif()
  file(WRITE "${PATH}" "${TEXT}")
endfunction()
