# make reproduce: every seed configuration, results/reference/*.csv next to
# the published figures, and the seed section of docs/validation.md.
# make reproduce-quick leaves out the llama2-70B rows (minutes each).
EXTRA_DIST += results/reproduce.sh results/reference/notes.md \
	results/reference/seed000_adaptive_memory.csv results/reference/seed001_fragmentation.csv \
	results/reference/seed002_smart_swap.csv results/reference/seed-section.md
.PHONY: reproduce reproduce-quick
reproduce: memsim$(EXEEXT)
	$(SHELL) $(srcdir)/results/reproduce.sh $(abs_builddir)/memsim$(EXEEXT) $(abs_srcdir)
reproduce-quick: memsim$(EXEEXT)
	$(SHELL) $(srcdir)/results/reproduce.sh $(abs_builddir)/memsim$(EXEEXT) $(abs_srcdir) quick
