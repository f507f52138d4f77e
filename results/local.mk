# make reproduce: every seed configuration, results/reference/*.csv next to
# the published figures, and the seed section of docs/validation.md, by
# memsim reproduce (cli/reproduce.c).  make reproduce-quick leaves out the
# llama2-70B rows (minutes each).  The notes the seed section ends with are
# installed with the scenarios, so an installed memsim reproduce finds them.
nobase_dist_pkgdata_DATA += results/reference/notes.md
EXTRA_DIST += results/reference/seed000_adaptive_memory.csv \
	results/reference/seed001_fragmentation.csv results/reference/seed002_smart_swap.csv \
	results/reference/seed-section.md
.PHONY: reproduce reproduce-quick
reproduce: memsim$(EXEEXT)
	./memsim$(EXEEXT) reproduce --out $(abs_srcdir)/results/reference \
		--doc $(abs_srcdir)/docs/validation.md
reproduce-quick: memsim$(EXEEXT)
	./memsim$(EXEEXT) reproduce --quick --out $(abs_srcdir)/results/reference \
		--doc $(abs_srcdir)/docs/validation.md
