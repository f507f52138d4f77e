-- Test fixture: attempts to leave the sandbox, one per profile.step.
local cases = {}
cases[0] = function() os.execute("touch /tmp/memsim-escaped") end
cases[1] = function() io.open("/etc/passwd") end
cases[2] = function() require("os") end
cases[3] = function() assert(load("\27LuaT\0\25\147\r\n\26\n\4\8\8xV\0\0\0\0\0\0\0\0\0\0\0(w@")) end
cases[4] = function() string.dump(function() end) end
cases[5] = function() dofile("/etc/passwd") end
cases[6] = function() loadfile("/etc/passwd") end
cases[7] = function() require("../none") end
cases[8] = function() debug.getinfo(1) end
cases[9] = function() package.loadlib("libc.so.6", "system") end
cases[10] = function() return require("lib.memsim").set end

return {
  plan = function(profile, ctx)
    cases[profile.step]()
  end,
}
