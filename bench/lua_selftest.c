/* The benchmark program: Lua 5.4 (from the lua-src crate) runs a self-test script. */
#include <stdio.h>
#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

static const char *selftest =
    "local t = {} for i = 1, 1000 do t[i] = i * i end\n"
    "local s = 0 for _, v in ipairs(t) do s = s + v end\n"
    "assert(s == 333833500, 'sum')\n"
    "assert(string.format('%5.2f', math.pi) == ' 3.14', 'format')\n"
    "local w = {} for x in ('the quick brown fox'):gmatch('%a+') do w[#w + 1] = x:upper() end\n"
    "assert(table.concat(w, ',') == 'THE,QUICK,BROWN,FOX', 'gmatch')\n"
    "local co = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i) end end)\n"
    "assert(co() + co() + co() == 6, 'coroutine')\n"
    "assert(load('return 2^10')() == 1024, 'load')\n"
    "local ok, err = pcall(error, 'boom') assert(not ok and err:find('boom'), 'pcall')\n"
    "local f = 0 for i = 1, 200000 do f = f + (i % 7) * 3 end assert(f == 1799991, 'loop')\n"
    "assert(utf8.len('h\\u{E9}llo') == 5, 'utf8')\n"
    "print('lua self-test ok')\n";

int main(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  if (luaL_dostring(L, selftest) != LUA_OK) {
    fprintf(stderr, "lua self-test failed: %s\n", lua_tostring(L, -1));
    return 1;
  }
  lua_close(L);
  return 0;
}
