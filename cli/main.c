#include "config.h"
#include <stdio.h>
int main(void) { printf("memsim %s\n", PACKAGE_VERSION); return 0; }
