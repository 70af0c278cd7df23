# syntax=docker/dockerfile:1.7
FROM debian
RUN <<EOF
set -e
echo one > /one
echo "two $HOME" > /two
EOF
RUN cat > /three <<'X'
literal $HOME
X
COPY <<conf.txt <<-other /etc/demo/
a=1
conf.txt
	b=2
other
ARG WHO=builder
ENV PLACE=here
COPY <<expanded <<"kept" /etc/demo/
${WHO} at $PLACE, \$PLACE
expanded
${WHO} at $PLACE
kept
RUN <<PL
#!/usr/bin/perl
open(my $f, ">", "/five") or die;
print $f "perl $0 $ENV{PLACE}\n";
PL
