FROM debian
COPY --parents sub/dir/f.txt /p/
COPY linked/ /l/
ADD a.tar.xz /xz/
ADD --checksum=sha256:@SUM@ b.tar.bz2 /bz/
ENV HOME=/custom
RUN echo "$HOME" > /home-seen
ADD caps.tar /lib/captest/
