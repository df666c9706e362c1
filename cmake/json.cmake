# JSON parsing and string escaping come from nlohmann-json (Debian's nlohmann-json3-dev),
# header-only and used only inside io/json.cpp: nothing of it reaches mixlab's own headers, so
# consumers of the library (and an installed package) need not find it.
find_package(nlohmann_json 3.10 REQUIRED)
target_link_libraries(mixlab_io PRIVATE $<BUILD_INTERFACE:nlohmann_json::nlohmann_json>)
