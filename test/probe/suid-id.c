/* Prints the effective ids. The test set-up (as root) installs a copy owned
 * by root with the setuid bit: inside rt it must not run as root. */
#include <stdio.h>
#include <unistd.h>
int main(void) {
  printf("euid=%d egid=%d\n", geteuid(), getegid());
  return 0;
}
