# lib/policy: the Lua policy host (profile view, ctx, decisions) and the
# decisions a scenario declares (its recompute and swap settings).
noinst_LTLIBRARIES += lib/policy/libms_policy.la
lib_policy_libms_policy_la_SOURCES = \
	lib/policy/policy.c lib/policy/policy_profile.c lib/policy/policy_view.c \
	lib/policy/policy_view.h lib/policy/policy_view_query.c \
	lib/policy/policy_ctx.c lib/policy/policy_options.c lib/policy/policy_host.h lib/policy/plan.c lib/policy/declared.c \
	lib/policy/declared.h
MS_PARTS += lib/policy/libms_policy.la
