# cmake -DFILE=F -DRPATH=R -P SetRpath.cmake: sets the RUNPATH of the ELF file F to R, or removes
# it when R is empty (setup.py: the package's copies of the build tree's libraries).
if(RPATH STREQUAL "")
  file(RPATH_REMOVE FILE "${FILE}")
else()
  file(RPATH_SET FILE "${FILE}" NEW_RPATH "${RPATH}")
endif()
