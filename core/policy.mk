# The Lua policy host: loads a policy into the sandbox (core/lua_sandbox.c),
# shows it the profile as read-only tables and collects its decisions.
noinst_LTLIBRARIES += core/libms_policy.la
core_libms_policy_la_SOURCES = core/policy.c core/policy_profile.c core/policy_view.c core/policy_ctx.c \
	core/policy_host.h
MS_PARTS += core/libms_policy.la

check_PROGRAMS += tests/unit/test_policy
TESTS += tests/unit/test_policy
tests_unit_test_policy_SOURCES = tests/unit/test_policy.c
tests_unit_test_policy_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_policy_LDADD = core/libms_policy.la core/libms_base.la $(TEST_LIBS)
EXTRA_DIST += \
	tests/data/policies/bad_pool.lua \
	tests/data/policies/budget.lua \
	tests/data/policies/cases.lua \
	tests/data/policies/escape.lua \
	tests/data/policies/hook_not_function.lua \
	tests/data/policies/inspect.lua \
	tests/data/policies/no_hooks.lua \
	tests/data/policies/on_oom.lua \
	tests/data/policies/returns_number.lua \
	tests/data/policies/runtime_error.lua \
	tests/data/policies/simulate.lua \
	tests/data/policies/syntax_error.lua
