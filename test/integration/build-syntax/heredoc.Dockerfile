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
